"""Variants of the FIT (not of the features): the training mix, the ridge,
the iterations and per-kind sample weights, each refitted with fit.py's own
steps on fit.py's corpus, measured per kind on what the fit did not read
(corpus.py's held-out and unseen kinds, among them this machine's
``/var/log``, and heldout.py's types fit.py does not read, ``NEVER_FITTED``:
none under ``corpus.FIT_EVERY_TYPE``).

    python tools/estimators/experiments/mix.py --family o200k --variant base --variant ridge10
    python tools/estimators/experiments/mix.py --family llama3 --shipped --variant base --write base

The encoded corpus is cached per family under /tmp/ctxcompact-heldout (the
sparse pair counts, exact counts and per-kind start statistics), so variants
cost a refinement each. Nothing is written to the repository unless
``--write VARIANT`` names a variant: then that variant's table is written as
fit.py writes it (fit.py's ``base`` fit is the same fit on the same training
texts; the heldout.py types added here, if any, are never trained on).

Variants (``VARIANTS``): ``base`` is fit.py's fit; ``ridgeN`` multiplies the
ridge by N; ``rpowP``, ``rfloorF`` and ``rinfoE`` reshape it
(fit.ridge_prior: each pair's ridge from its share ** P, its share floored
at F times the median share, or its share over ``w0 (1 - w0) + E``, the
total unchanged); ``even`` weighs each kind's training texts so every kind counts
the same in the loss; ``powP`` is between (a kind of n texts weighs n ** P
in all, ``kind_weights``); ``itN`` runs N iterations; ``no-KIND`` leaves a
kind out of the fit. Variants combine with ``+`` (``ridge10+even``,
``rpow0.5+ridge3``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corpus
import fit
import heldout

CACHE = heldout.CACHE
#: heldout.py's types fit.py does not read (corpus.HELDOUT_FITTED): added as
#: unseen kinds. None under corpus.FIT_EVERY_TYPE.
NEVER_FITTED = tuple(
    t for t in heldout.TYPES if t not in corpus.HELDOUT_FITTED and t != "transcript"
)
CHUNK = 4000
#: Kinds reported per language as well (``scripts:el``), by corpus.script_language.
PER_LANGUAGE = ("scripts",)


def units() -> list[corpus.Unit]:
    out = corpus.units()
    for m in heldout.messages(heldout.fetch()):
        if m.kind in NEVER_FITTED:
            out.append(corpus.Unit(m.text, f"heldout-{m.kind}", m.session, "unseen"))
    return out


class Encoded:
    """fit.Encoded over the corpus in chunks: pair counts per text, exact
    counts, start statistics per kind over the training texts."""

    def __init__(self, us: list[corpus.Unit], family: str) -> None:
        xs, exact = [], []
        self.occ: dict[str, np.ndarray] = {}
        self.hits: dict[str, np.ndarray] = {}
        for lo in range(0, len(us), CHUNK):
            chunk = us[lo : lo + CHUNK]
            enc = fit.Encoded(chunk, family)
            xs.append(enc.x)
            exact.append(enc.exact)
            train = np.array([u.split == "train" for u in chunk])
            kinds = np.array([u.kind for u in chunk])
            for k in set(kinds[train]):
                occ, hits = enc.start_counts((train & (kinds == k))[enc.unit_of_byte])
                self.occ[k] = self.occ.get(k, 0) + occ
                self.hits[k] = self.hits.get(k, 0) + hits
        self.x = sp.vstack(xs).tocsr()
        self.exact = np.concatenate(exact)


def load(family: str, us: list[corpus.Unit]) -> Encoded:
    digest = hashlib.sha256()
    for u in us:
        digest.update(f"{u.kind}\0{u.group}\0{u.split}\0{u.text}\0".encode())
    path = CACHE / f"mix-{family}-{digest.hexdigest()[:16]}.pickle"
    if path.exists():
        with path.open("rb") as f:
            enc: Encoded = pickle.load(f)
            return enc
    t0 = time.perf_counter()
    enc = Encoded(us, family)
    seconds = time.perf_counter() - t0
    print(f"{family}: {len(us):,} texts encoded in {seconds:.0f} s", file=sys.stderr)
    with path.open("wb") as f:
        pickle.dump(enc, f)
    return enc


def kind_weights(kinds: np.ndarray, power: float) -> np.ndarray:
    """Per text, a weight so that a kind of n texts weighs n ** power in all
    (power 1: fit.py's, every text alike; 0: every kind alike)."""
    _, inverse, counts = np.unique(kinds, return_inverse=True, return_counts=True)
    per_kind = counts.astype(np.float64) ** power / counts
    w = per_kind[inverse]
    return w / w.mean()


def run_variant(
    name: str, us: list[corpus.Unit], enc: Encoded, maxiter: int
) -> tuple[np.ndarray, np.ndarray]:
    prior, power, iters, exclude = [], 1.0, maxiter, set()
    for part in name.split("+"):
        if part == "base":
            continue
        if part.startswith(fit.PRIOR_PARTS):
            prior.append(part)
        elif part == "even":
            power = 0.0
        elif part.startswith("pow"):
            power = float(part[3:])
        elif part.startswith("it"):
            iters = int(part[2:])
        elif part.startswith("no-"):
            exclude.add(part[3:])
        else:
            raise SystemExit(f"unknown variant part {part!r}")
    kinds = np.array([u.kind for u in us])
    train = np.array([u.split == "train" for u in us]) & ~np.isin(kinds, list(exclude))
    keep = [k for k in enc.occ if k not in exclude]
    occ = sum(enc.occ[k] for k in keep)
    hits = sum(enc.hits[k] for k in keep)
    w0 = fit.frequencies(occ, hits)
    rows = train & (enc.exact > 0)
    sample = kind_weights(kinds[rows], power)
    weights = fit.refine(
        enc.x[rows], enc.exact[rows], w0, occ, iters, sample_weight=sample, variant="+".join(prior)
    )
    return weights, w0


def report(us: list[corpus.Unit], enc: Encoded, weights: np.ndarray) -> dict[str, dict]:
    est = fit.estimate(enc.x, weights)
    kinds = np.array([u.kind for u in us])
    splits = np.array([u.split for u in us])
    groups = np.array([f"{u.kind}/{u.group}" for u in us])
    out: dict[str, dict] = {}
    # fit.py's own report (in-domain, unseen, runs, files) on fit.py's texts
    mine = np.array([u.kind.removeprefix("heldout-") in NEVER_FITTED for u in us])
    mine &= np.array([u.kind.startswith("heldout-") for u in us])
    theirs = [u for u, m in zip(us, mine) if not m]
    out["_fit"] = fit.evaluate(theirs, _Exact(enc.exact[~mine]), est[~mine])
    # the scripts kind per language too, as KIND:LANG (corpus.script_language)
    lang_of = corpus.script_language
    langs = np.array([f"{u.kind}:{lang_of(u.group)}" if u.kind in PER_LANGUAGE else "" for u in us])
    names = sorted(set(kinds)) + sorted(set(langs) - {""})
    for k in names:
        sel = (langs == k if ":" in k else kinds == k) & (splits != "train")
        if not sel.any():
            continue
        big = sel & (enc.exact >= fit.MIN_TOKENS)
        if not big.any():
            continue
        s = fit._stats(est[big], enc.exact[big])
        _, inv = np.unique(groups[sel], return_inverse=True)
        e_s, x_s = np.bincount(inv, weights=est[sel]), np.bincount(inv, weights=enc.exact[sel])
        ok = x_s >= 200
        off = np.abs(e_s[ok] / x_s[ok] - 1)
        s["session_p95"] = float(np.percentile(off, 95)) if ok.any() else float("nan")
        s["sessions"] = int(ok.sum())
        s["split"] = str(splits[sel][0])
        out[k] = s
    return out


class _Exact:
    """What fit.evaluate reads of fit.Encoded."""

    def __init__(self, exact: np.ndarray) -> None:
        self.exact = exact


def _pct(v: float) -> str:
    return f"{100 * v:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="o200k")
    parser.add_argument("--variant", action="append")
    parser.add_argument("--maxiter", type=int, default=300)
    parser.add_argument("--shipped", action="store_true", help="report the shipped table too")
    parser.add_argument("--table", action="append", default=[], help="a table file to report")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--write", help="write this variant's table (the shipped file)")
    args = parser.parse_args(argv)
    us = units()
    enc = load(args.family, us)
    rows: dict[str, dict] = {}
    if args.shipped:
        rows["shipped"] = report(us, enc, fit.read_table(args.family)[0])
    for path in args.table:
        rows[Path(path).stem] = report(us, enc, fit.read_table(args.family, Path(path))[0])
    for name in args.variant or []:
        t0 = time.perf_counter()
        weights, _ = run_variant(name, us, enc, args.maxiter)
        rows[name] = report(us, enc, weights)
        rows[name]["_weights"] = {"digit": weights[fit.DIGIT], "punct": weights[fit.PUNCT]}
        print(f"{name}: {time.perf_counter() - t0:.0f} s, digit {weights[fit.DIGIT]:.3f} "
              f"punct {weights[fit.PUNCT]:.3f}", file=sys.stderr, flush=True)  # fmt: skip
        if args.write == name:
            train = np.array([u.split == "train" for u in us]) & (enc.exact >= fit.MIN_TOKENS)
            ratio = enc.exact[train] / np.maximum(fit.estimate(enc.x[train], weights), 1)
            factor = max(1.0, float(np.quantile(ratio, fit.CONSERVATIVE_QUANTILE)))
            fit.write_table(args.family, weights, factor)
            print(f"wrote {fit.table_path(args.family)} (factor {factor:.3f})", file=sys.stderr)
        np.save(CACHE / f"mix-{args.family}-{name}.npy", weights)
    kinds = sorted({k for r in rows.values() for k in r if not k.startswith("_")})
    print("| kind | split | " + " | ".join(rows) + " |")
    print("|---|---|" + "---|" * len(rows))
    for k in kinds:
        cells = []
        split = ""
        for r in rows.values():
            s = r.get(k)
            if s is None:
                cells.append("")
                continue
            split = s["split"]
            cells.append(
                f"{_pct(s['p50'])} / {_pct(s['p95'])} / {_pct(s['p99'])}, {100 * s['bias']:+.1f}, "
                f"s {_pct(s['session_p95'])}"
            )
        print(f"| {k} | {split} | " + " | ".join(cells) + " |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
