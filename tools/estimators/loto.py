"""Leave-one-type-out refits of the byte-bigram table on the wider corpus
(heldout.py's content types plus corpus.py's kinds), so the error reported
for a type comes from a table that never saw that type.

    python tools/estimators/loto.py --family o200k              # every fold
    python tools/estimators/loto.py --family o200k --hold log   # one fold
    python tools/estimators/loto.py --hold code-java+diff+stack-trace  # types left out together
    python tools/estimators/loto.py --with-corpus --hold other-lang:it  # one language
    python tools/estimators/loto.py --variant rpow0.5 --maxiter 300  # another ridge shape

For each held-out type X: start frequencies and the bounded refinement of
fit.py (the same functions) on the training half of the sessions of every
type but X, then the error on all of X's messages and sessions
(heldout.evaluate); then a correction by the shares of byte classes in a
text's first KB (``exact ~ estimate * (shares @ beta)``), fitted on the same
training texts. With ``--with-corpus`` corpus.py's training texts are fitted
on too, its kinds mapped onto the types they are (its code by file suffix,
its diff, log, prose, JSON), so holding X out drops them too; its transcript
kind is the same runs as the ``transcript`` type and is left out; its
non-English man pages are a type of their own, ``non-english`` (every file, its
training files fitted, all of them reported on when it is held out). A
language of the man pages is held out alone as ``TYPE:LANG`` (``other-lang:it``,
``non-english:de``; ``corpus.man_language``), the type's other languages
fitted; ``other-lang`` and ``non-english`` hold every language of theirs. The ``all`` fold fits
on half of each type's sessions and reports on the other half (in sample by
type, out of sample by session). Nothing is written: the shipped tables are
refitted only by fit.py.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import pickle
import random
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
import fit
import heldout
import vocab

#: How corpus.py's kinds map onto heldout.py's types (None: no heldout type;
#: always in the fit). Its code is split by the file's suffix.
KIND_TYPE = {
    "code": None,
    "diff": "diff",
    "log": "log",
    "prose": "prose",
    "json": "json",
    "transcript": "drop",
    # the other languages' man pages: read as a type of their own (OTHER_LANG)
    "other-lang": "drop",
    # the fitted languages' man pages: read as a type of their own (NON_ENGLISH)
    "non-english": "drop",
    # heldout.py's own messages, which corpus.py now fits on: read here already
    **{f"heldout-{t}": "drop" for t in corpus.HELDOUT_FITTED},
}
CODE_SUFFIX = {".py": "code-python", ".rs": "code-rust", ".h": "code-c"}
#: Texts per encoding chunk (bounds the memory of fit.Encoded).
CHUNK = 4000


def _type_of(unit: corpus.Unit) -> str | None:
    if unit.kind == "code":
        return CODE_SUFFIX.get(Path(unit.group).suffix)
    return KIND_TYPE.get(unit.kind)


#: Byte classes whose shares in a text's first KB the correction reads.
CLASSES = (
    b"abcdefghijklmnopqrstuvwxyz",
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    b"0123456789",
    b" ",
    b"\t\n\r",
    bytes(range(0x80, 0x100)),
)
SNIFF = 1024


def shares(texts: list[str]) -> np.ndarray:
    """Each text's share of every class (and of the rest) in its first KB."""
    lut = np.full(256, len(CLASSES), dtype=np.int64)
    for i, members in enumerate(CLASSES):
        lut[np.frombuffer(members, dtype=np.uint8)] = i
    out = np.zeros((len(texts), len(CLASSES) + 1))
    for row, t in enumerate(texts):
        head = np.frombuffer(t.encode()[:SNIFF], dtype=np.uint8)
        out[row] = np.bincount(lut[head], minlength=len(CLASSES) + 1) / max(len(head), 1)
    return out


def fit_correction(est: np.ndarray, exact: np.ndarray, f: np.ndarray) -> np.ndarray:
    """beta of ``exact ~ est * (f @ beta)`` in relative least squares (f holds
    every class share, so a constant factor is in its span)."""
    a = (est / exact)[:, None] * f
    beta, *_ = np.linalg.lstsq(a, np.ones(len(est)), rcond=None)
    return beta


def _half(session: str) -> bool:
    return heldout.train_half(session)


#: corpus.py's man pages in the other languages (pl, it, pt_BR, cs, tr), a
#: type of their own here: a session is a man page's file, halves as
#: heldout.py's (``train_half`` of the file).
OTHER_LANG = "other-lang"


def other_lang() -> list[heldout.Message]:
    rng = random.Random(0)
    units = corpus._man(OTHER_LANG, corpus.OTHER_LANG, rng)
    return [heldout.Message(u.text, OTHER_LANG, u.group) for u in units if u.text.strip()]


#: corpus.py's man pages in the languages its fit reads (de, fr, es, ru,
#: zh_CN, ja, ko), a type of their own with ``--with-corpus``: every file is
#: read, its training files (corpus.py's split) fitted unless held out.
NON_ENGLISH = "non-english"
#: The types whose messages are man pages, held out a language at a time as
#: ``TYPE:LANG``.
MAN_TYPES = (OTHER_LANG, NON_ENGLISH)


def non_english(units: list[corpus.Unit]) -> list[tuple[heldout.Message, bool]]:
    """corpus.py's non-English man pages as messages, with whether corpus.py
    fits on them (its ``train`` split)."""
    return [
        (heldout.Message(u.text, NON_ENGLISH, u.group), u.split == "train")
        for u in units
        if u.kind == NON_ENGLISH
    ]


def fine_type(m: heldout.Message) -> str:
    """A message's type as the folds hold it: a man page's is ``TYPE:LANG``
    (``corpus.man_language`` of its file), every other message's its kind."""
    if m.kind in MAN_TYPES:
        return f"{m.kind}:{corpus.man_language(m.session)}"
    return m.kind


def held_by(fine: str, held: list[str]) -> str | None:
    """Which of a fold's held names (``log``, ``other-lang``,
    ``other-lang:it``) leaves a type out, if any: a man page type's name
    holds each of its languages."""
    for name in held:
        if fine == name or fine.startswith(f"{name}:"):
            return name
    return None


#: loto.py's own parts of a variant (the rest is fit.ridge_prior's):
#: ``backoff`` (``backoffN``: N pseudo-observations, 4 without, as
#: fit.SMOOTHING), fit.frequencies' class backoff for the non-ASCII pairs, and
#: ``manwN``, the man pages' texts (every fitted language's) weighed N times
#: in the refinement (docs/estimators.md, "A language no fit has read").
DESIGN_PARTS = ("backoff", "manw")


def _number(variant: str, part: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"variant {variant!r}: malformed part {part!r}") from None
    if not value > 0:
        raise ValueError(f"variant {variant!r}: malformed part {part!r}")
    return value


def design(variant: str) -> tuple[str, float, float]:
    """A variant split into fit.ridge_prior's part, the backoff's
    pseudo-observations (0: none) and the man pages' weight
    (``base+backoff+manw3`` -> ``("base", 4.0, 3.0)``)."""
    ridge, backoff, weight = [], 0.0, 1.0
    for part in filter(None, variant.split("+")):
        if part == "backoff":
            backoff = fit.SMOOTHING
        elif part.startswith("backoff"):
            backoff = _number(variant, part, part[7:])
        elif part.startswith("manw"):
            weight = _number(variant, part, part[4:])
        else:
            ridge.append(part)
    return "+".join(ridge) or "base", backoff, weight


def kept(keys: Iterable[str], held: list[str]) -> list[str]:
    """The start statistics' keys a fold fits on: every training key no held
    name holds (``held_by``)."""
    return [k for k in keys if not k.endswith("#eval") and held_by(k, held) is None]


def unknown_names(held: list[str], types: list[str]) -> list[str]:
    """The held names that hold none of the types (a typo would otherwise
    fit on everything and report nothing)."""
    return [name for name in held if not any(held_by(t, [name]) for t in types)]


class Features:
    """Bigram counts per text, exact counts, and start statistics per type."""

    def __init__(self, texts: list[str], types: list[str | None], family: str) -> None:
        xs, exact = [], []
        keys = sorted({str(t) for t in types})
        self.occ = {k: np.zeros(fit.FEATURES) for k in keys}
        self.hits = {k: np.zeros(fit.FEATURES) for k in keys}
        for lo in range(0, len(texts), CHUNK):
            chunk = [
                corpus.Unit(t, "x", str(i), "train") for i, t in enumerate(texts[lo : lo + CHUNK])
            ]
            enc = fit.Encoded(chunk, family)
            xs.append(enc.x)
            exact.append(enc.exact)
            kinds = np.array([str(t) for t in types[lo : lo + CHUNK]])[enc.unit_of_byte]
            for k in set(kinds):
                occ, hits = enc.start_counts(kinds == k)
                self.occ[k] += occ
                self.hits[k] += hits
        self.x = sp.vstack(xs).tocsr()
        self.exact = np.concatenate(exact)

    def start_frequencies(
        self, keep: list[str], backoff: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """fit.start_frequencies over the texts of the kept types."""
        occ = sum(self.occ[k] for k in keep)
        hits = sum(self.hits[k] for k in keep)
        return fit.frequencies(occ, hits, backoff), occ


def _merged(parts: list[Features]) -> Features:
    """Features of the parts' texts in order (start statistics summed per key)."""
    out = parts[0]
    for part in parts[1:]:
        out.x = sp.vstack([out.x, part.x]).tocsr()
        out.exact = np.concatenate([out.exact, part.exact])
        for k in part.occ:
            out.occ[k] = out.occ.get(k, 0) + part.occ[k]
            out.hits[k] = out.hits.get(k, 0) + part.hits[k]
    return out


def _features(texts: list[str], keys: list[str], family: str) -> Features:
    """Features, cached under heldout.CACHE by the texts, keys and family (so
    runs of other variants or folds skip the encoding)."""
    digest = hashlib.sha256(family.encode())
    for t, k in zip(texts, keys):
        digest.update(f"{k}\0{t}\0".encode())
    path = heldout.CACHE / f"loto-{family}-{digest.hexdigest()[:16]}.pickle"
    if path.exists():
        with path.open("rb") as fh:
            cached: Features = pickle.load(fh)
            return cached
    feats = Features(texts, keys, family)
    with path.open("wb") as fh:
        pickle.dump(feats, fh)
    return feats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="o200k", choices=vocab.FAMILIES)
    parser.add_argument(
        "--hold", action="append", help="a type, types joined by + (left out together), or all"
    )
    parser.add_argument("--maxiter", type=int, default=3000)
    parser.add_argument(
        "--variant",
        action="append",
        help="the refinement's ridge (fit.ridge_prior, e.g. base, rpow0.5+ridge3) and "
        "loto.py's designs (backoff, manwN: DESIGN_PARTS); each fold is refitted under "
        "every one given, on one encoding",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--with-corpus", action="store_true", help="fit on corpus.py's training texts too"
    )
    parser.add_argument(
        "--no-other-lang",
        action="store_true",
        help="without the other languages' man pages (the folds before stop 51)",
    )
    args = parser.parse_args(argv)
    for variant in args.variant or []:
        try:
            ridge, _, _ = design(variant)
            fit.ridge_prior(np.ones(1), ridge, np.full(1, 0.5))
        except ValueError as exc:
            parser.error(f"--variant {variant}: {exc}")
    known = [
        *heldout.TYPES,
        *([] if args.no_other_lang else [f"{OTHER_LANG}:{lang}" for lang in corpus.OTHER_LANG]),
        *([f"{NON_ENGLISH}:{lang}" for lang in corpus.NON_ENGLISH] if args.with_corpus else []),
    ]
    for hold in args.hold or []:
        if hold != "all" and (unknown := unknown_names(hold.split("+"), known)):
            parser.error(f"--hold {hold}: no type {unknown[0]!r} in this run ({', '.join(known)})")
    msgs = heldout.messages(heldout.fetch())
    extra = [] if args.no_other_lang else other_lang()
    units = corpus.units() if args.with_corpus else []
    base = [u for u in units if u.split == "train" and _type_of(u) != "drop"]
    man = non_english(units)
    t0 = time.perf_counter()
    # Start statistics are kept per type and per half: "<type>" is the
    # training half of the heldout sessions plus corpus.py's texts (a man
    # page's type is "<type>:<language>"). Encoded (and cached) in parts,
    # heldout.py's messages, the other languages' man pages, the fitted
    # languages' and corpus.py's other texts, so a part's cache serves runs
    # with or without the others.
    train_half = np.array(
        [_half(m.session) for m in msgs + extra] + [t for _, t in man] + [True] * len(base)
    )
    bounds = np.cumsum([0, len(msgs), len(extra), len(man), len(base)])
    msgs = msgs + extra + [m for m, _ in man]
    texts = [m.text for m in msgs] + [u.text for u in base]
    types: list[str | None] = [fine_type(m) for m in msgs] + [_type_of(u) for u in base]
    keys = [f"{t}" if h else f"{t}#eval" for t, h in zip(types, train_half)]
    feats = _merged(
        [
            _features(texts[lo:hi], keys[lo:hi], args.family)
            for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        ]
    )
    f = shares(texts)
    print(f"{len(texts):,} texts encoded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    n = len(msgs)
    rows_out = []
    variants = args.variant or ["base"]
    holds = args.hold or [*heldout.TYPES, *([OTHER_LANG] if extra else []), "all"]
    fine = np.array(types[:n])
    for hold, variant in [(h, v) for h in holds for v in variants]:
        label = f"{hold} [{variant}]" if args.variant else hold
        t0 = time.perf_counter()
        held = hold.split("+")
        keep = kept(feats.occ, held)
        fit_rows = np.isin(np.array(keys), keep) & (feats.exact > 0)
        ridge, backoff, man_weight = design(variant)
        w0, occ = feats.start_frequencies(keep, backoff)
        sample_weight = None
        if man_weight != 1.0:
            man_rows = np.array([k.split(":")[0] in MAN_TYPES for k in keys])[fit_rows]
            sample_weight = np.where(man_rows, man_weight, 1.0)
        weights = fit.refine(
            feats.x[fit_rows],
            feats.exact[fit_rows],
            w0,
            occ,
            args.maxiter,
            sample_weight=sample_weight,
            variant=ridge,
        )
        est = fit.estimate(feats.x[:n], weights)
        base_est = fit.estimate(feats.x[:n], w0)
        if hold == "all":
            sel = ~train_half[:n]
            picked = [m for m, s in zip(msgs, sel) if s]
        else:
            # reported under the name that holds it (other-lang, other-lang:it)
            names = [held_by(t, held) for t in fine]
            sel = np.array([name is not None for name in names])
            picked = [
                heldout.Message(m.text, name, m.session)
                for m, name in zip(msgs, names)
                if name is not None
            ]
        report = heldout.evaluate(picked, est[sel], feats.exact[:n][sel])
        first = heldout.evaluate(picked, base_est[sel], feats.exact[:n][sel])
        # the class-share correction, fitted on the fold's training texts
        train_est = fit.estimate(feats.x[fit_rows], weights)
        big = feats.exact[fit_rows] >= fit.MIN_TOKENS
        beta = fit_correction(train_est[big], feats.exact[fit_rows][big], f[fit_rows][big])
        corrected = np.floor(est * (f[:n] @ beta) + 0.5)
        fixed = heldout.evaluate(picked, corrected[sel], feats.exact[:n][sel])
        rows_out.append((label, report, first, fixed, beta.tolist()))
        for kind, s in report.items():
            c = fixed[kind]
            print(
                f"hold {label}: {kind} corrected p50/p95/p99 {heldout._pct(c['p50'])} / "
                f"{heldout._pct(c['p95'])} / {heldout._pct(c['p99'])} bias {100 * c['bias']:+.1f}% "
                f"session p95 {heldout._pct(c['session_p95'])}",
                flush=True,
            )
            print(
                f"hold {label}: {kind} p50/p95/p99 {heldout._pct(s['p50'])} / "
                f"{heldout._pct(s['p95'])} / {heldout._pct(s['p99'])} bias {100 * s['bias']:+.1f}% "
                f"session p95 {heldout._pct(s['session_p95'])} (start frequencies only: p95 "
                f"{heldout._pct(first[kind]['p95'])}, bias {100 * first[kind]['bias']:+.1f}%) "
                f"[{time.perf_counter() - t0:.0f} s]",
                flush=True,
            )
        if args.json:  # after every fold: a long run's folds are kept if it stops
            args.json.write_text(json.dumps(rows_out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
