"""Fit the byte-bigram token estimators and report their accuracy.

    python tools/estimators/fit.py                 # fit every family, write the tables
    python tools/estimators/fit.py --check         # evaluate the shipped tables only
    python tools/estimators/fit.py --family o200k  # one family

The model (rust/src/bigram.rs): ``tokens = round(sum of W[previous byte,
byte] / 65536)`` over the text's bytes, the first byte's previous byte being a
start marker (row 256), and a space or tab inside a run of it reading a run row
of its own (rows 257-258, ``RUNS``), so 259 x 256 weights stored as u16 and
summed exactly in u64. A weight is the chance that a token starts at that byte.
An ASCII digit that starts a group of three in its run of digits (the 4th,
7th, ... of the run) adds one more weight, ``DIGIT``, kept in the header: most
tokenizers cut digits into threes, which no pair of digits can see. An ASCII
letter after ASCII punctuation that follows a space or punctuation (``"/usr``,
``://host``, ``().name``) adds another, ``PUNCT``, also in the header: the
pre-split starts a token there, where after a letter (``java/lang``) the
punctuation and the name are often one token.

Fitting, per family, on the ``train`` groups of corpus.py:

1. Start frequencies: for each byte pair, how often the exact tokenizer starts
   a token at the second byte, smoothed towards that byte's overall rate for
   pairs seen rarely. Summed over a text this is the expected token count
   under a bigram model of the boundaries.
2. Refinement on totals: bounded least squares (L-BFGS-B, weights in [0, 1))
   of each text's relative error, with a ridge pulling every weight towards
   its start frequency in proportion to how often the pair was seen. The
   bounds are part of the fit: clipping unconstrained weights afterwards
   breaks the model.
3. The conservative factor: the multiplier under which at most 2% of the
   training texts are under-counted (checked on held-out texts in the report).

Accuracy is measured on texts of at least 20 exact tokens: per text, and per
group (a run of ../shared/data, or a file), on held-out groups of the fitted
kinds (in-domain) and on kinds never fitted on (unseen); see corpus.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np
import scipy.optimize
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
import vocab

TABLES = vocab.ASSETS / "estimators"
#: Bytes whose runs get a row of their own: inside a run (the same byte before
#: and after) a token almost never starts, since tokenizers take a run of
#: spaces as one token up to its last byte, which starts the next word.
RUNS = b" \t"
ROWS, COLS = 257 + len(RUNS), 256
START = 256
#: The digit group weight's index, after the table's weights.
DIGIT = ROWS * COLS
#: The punctuation weight's index: an ASCII letter after a ``PUNCT_BYTES``
#: byte that itself follows a space or ASCII punctuation (``"/name``,
#: ``://name``, `` /name``, ``().name``): the tokenizers' pre-split joins that
#: byte to the punctuation before it, so the letter starts a token; after a
#: letter or digit (``java/lang``, ``a.name``) the byte and the name are one
#: piece, which no byte pair tells apart.
PUNCT = DIGIT + 1
FEATURES = PUNCT + 1
#: The bytes before the letter the punctuation weight reads: ASCII
#: punctuation (``/`` alone and ``/.\\`` measured worse, docs/estimators.md).
PUNCT_BYTES = bytes(b for b in range(0x21, 0x7F) if not chr(b).isalnum())
SCALE = 1 << 16
MAGIC = b"ctxbgr2\0"
#: Tables written before the punctuation weight: read with it 0.
MAGIC_V1 = b"ctxbgr1\0"
MIN_TOKENS = 20
SMOOTHING = 4.0  # pseudo-observations pulling a rare pair towards its byte's rate
RIDGE = 0.00003
CONSERVATIVE_QUANTILE = 0.98


def table_path(family: str) -> Path:
    return TABLES / f"{family}.bin"


def write_table(family: str, weights: np.ndarray, conservative: float) -> None:
    """Header (magic, conservative factor in 1/65536, the digit group weight
    and the punctuation weight in 1/65536, a reserved u32 of 0), then ROWS x
    256 (259 x 256) little-endian u16 weights in 1/65536 tokens."""
    q = np.clip(np.rint(weights * SCALE), 0, SCALE - 1).astype("<u2")
    digit, punct = int(q[DIGIT]), int(q[PUNCT])
    q = q[:DIGIT]
    for k, b in enumerate(RUNS):  # the core refuses a run weight above its pair's
        run, pair = q[(START + 1 + k) * COLS + b], q[b * COLS + b]
        if run > pair:
            raise ValueError(f"{family}: run weight of {bytes([b])!r} above its pair weight")
    factor = round(conservative * SCALE)
    TABLES.mkdir(parents=True, exist_ok=True)
    header = MAGIC + struct.pack("<IIII", factor, digit, punct, 0)
    table_path(family).write_bytes(header + q.tobytes())


def read_table(family: str, path: Path | None = None) -> tuple[np.ndarray, float]:
    """A family's shipped table (or the table file at ``path``): its weights
    (``FEATURES``) and conservative factor."""
    path = table_path(family) if path is None else path
    raw = path.read_bytes()
    if raw[:8] == MAGIC:
        factor, digit, punct, _ = struct.unpack("<IIII", raw[8:24])
        body = raw[24:]
    elif raw[:8] == MAGIC_V1:
        (factor, digit), punct = struct.unpack("<II", raw[8:16]), 0
        body = raw[16:]
    else:
        raise ValueError(f"{path}: not an estimator table")
    weights = np.frombuffer(body, dtype="<u2").astype(np.float64) / SCALE
    return np.append(weights, [digit / SCALE, punct / SCALE]), factor / SCALE


def digit_groups(data: np.ndarray, unit_starts: np.ndarray) -> np.ndarray:
    """Whether each byte is an ASCII digit that starts a group of three in its
    run of digits (position 3, 6, ... of the run; a unit starts a new run)."""
    digit = (data >= 48) & (data <= 57)
    at = np.arange(len(data))
    begin = np.where(digit, 0, at + 1)
    begin[unit_starts] = np.maximum(begin[unit_starts], unit_starts)
    position = at - np.maximum.accumulate(begin)
    return digit & (position > 0) & (position % 3 == 0)


def _is_word(data: np.ndarray) -> np.ndarray:
    """ASCII letters and digits."""
    return (
        ((data >= 48) & (data <= 57))
        | ((data >= 65) & (data <= 90))
        | ((data >= 97) & (data <= 122))
    )


def punct_context(data: np.ndarray, unit_starts: np.ndarray) -> np.ndarray:
    """Whether each byte is an ASCII letter after a ``PUNCT_BYTES`` byte that
    follows a space or ASCII punctuation (0x20-0x7E, not a letter or digit),
    all three in one unit."""
    n = len(data)
    out = np.zeros(n, dtype=bool)
    if n < 3:
        return out
    letter = ((data >= 65) & (data <= 90)) | ((data >= 97) & (data <= 122))
    punct = np.isin(data, np.frombuffer(PUNCT_BYTES, dtype=np.uint8))
    nonword = (data >= 0x20) & (data <= 0x7E) & ~_is_word(data)
    out[2:] = letter[2:] & punct[1:-1] & nonword[:-2]
    # the two bytes before the letter must be in its unit
    out[unit_starts] = False
    out[np.minimum(unit_starts + 1, n - 1)[unit_starts + 1 < n]] = False
    return out


class Encoded:
    """Every unit's bytes, bigram features and exact counts for one family."""

    def __init__(self, units: list[corpus.Unit], family: str) -> None:
        encode, lengths = vocab.encoder(family)
        texts = [u.text for u in units]
        t0 = time.perf_counter()
        ids = encode(texts)
        self.encode_seconds = time.perf_counter() - t0
        token_len = np.asarray(lengths, dtype=np.int64)
        self.exact = np.array([len(i) for i in ids], dtype=np.float64)
        raw = [t.encode() for t in texts]
        sizes = np.array([len(b) for b in raw], dtype=np.int64)
        data = np.frombuffer(b"".join(raw), dtype=np.uint8).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        prev = np.empty_like(data)
        prev[1:] = data[:-1]
        prev[offsets[:-1][sizes > 0]] = START
        for k, b in enumerate(RUNS):
            # the middle of a run: the byte before and after are the same byte
            mid = np.zeros(len(data), dtype=bool)
            mid[1:-1] = (data[:-2] == b) & (data[1:-1] == b) & (data[2:] == b)
            ends = offsets[1:][sizes > 0] - 1
            mid[ends] = False  # the last byte of a unit has no successor
            mid[offsets[:-1][sizes > 0]] = False
            prev[mid] = START + 1 + k
        self.feature = prev * COLS + data
        self.unit_of_byte = np.repeat(np.arange(len(units)), sizes)
        self.group = digit_groups(data, offsets[:-1][sizes > 0])
        self.punct = punct_context(data, offsets[:-1][sizes > 0])
        # Where tokens start: cumulative token lengths inside each unit.
        starts = np.zeros(len(data), dtype=bool)
        for u, toks in enumerate(ids):
            if toks:
                pos = np.cumsum(token_len[np.asarray(toks[:-1], dtype=np.int64)])
                starts[offsets[u]] = True
                starts[offsets[u] + pos[pos < sizes[u]]] = True
        self.starts = starts
        g = np.nonzero(self.group)[0]
        h = np.nonzero(self.punct)[0]
        self.x = sp.csr_matrix(
            (
                np.ones(len(data) + len(g) + len(h)),
                (
                    np.concatenate([self.unit_of_byte, self.unit_of_byte[g], self.unit_of_byte[h]]),
                    np.concatenate([self.feature, np.full(len(g), DIGIT), np.full(len(h), PUNCT)]),
                ),
            ),
            shape=(len(units), FEATURES),
        )
        self.x.sum_duplicates()

    def start_counts(self, byte_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per feature, how often it occurs among the bytes of ``byte_mask`` and
        how often a token starts there: pairs at the bytes that start no digit
        group and have no punctuation context, ``DIGIT`` and ``PUNCT`` at those that
        do (a pair's counts include neither, so its rate is the rate without)."""
        pair = byte_mask & ~self.group & ~self.punct
        occ = np.bincount(self.feature[pair], minlength=FEATURES).astype(np.float64)
        hits = np.bincount(self.feature[pair], weights=self.starts[pair], minlength=FEATURES)
        group = byte_mask & self.group
        occ[DIGIT], hits[DIGIT] = group.sum(), self.starts[group].sum()
        punct = byte_mask & self.punct
        occ[PUNCT], hits[PUNCT] = punct.sum(), self.starts[punct].sum()
        return occ, hits


def byte_class(b: np.ndarray) -> np.ndarray:
    """A byte's (or a row's) role in UTF-8 text: 0 ASCII letter, 1 digit, 2
    whitespace, 3 other ASCII, 4 continuation byte, 5 a two-byte sequence's
    lead, 6 a three-byte one's, 7 a four-byte one's (or invalid), 8 the start
    and run rows."""
    out = np.full(len(b), 3)
    out[((b >= 65) & (b <= 90)) | ((b >= 97) & (b <= 122))] = 0
    out[(b >= 48) & (b <= 57)] = 1
    out[np.isin(b, [9, 10, 13, 32])] = 2
    out[(b >= 0x80) & (b < 0xC0)] = 4
    out[(b >= 0xC0) & (b < 0xE0)] = 5
    out[(b >= 0xE0) & (b < 0xF0)] = 6
    out[(b >= 0xF0) & (b < 0x100)] = 7
    out[b >= 0x100] = 8
    return out


#: Classes of ``byte_class`` (the backoff's pooled rates are per pair of them).
BYTE_CLASSES = 9


def frequencies(occ: np.ndarray, hits: np.ndarray, backoff: float = 0.0) -> np.ndarray:
    """Start frequencies from ``Encoded.start_counts``: each pair's, smoothed
    towards its byte's rate; the digit group weight is what a group start adds
    to the digit pairs' mean rate. ``backoff`` (an experiment, not the shipped
    fit: docs/estimators.md, "A language no fit has read"), when above 0: a
    pair with a non-ASCII byte is smoothed instead, with ``backoff``
    pseudo-observations, towards the rate of its byte after any byte of its
    previous byte's class (``byte_class``), itself smoothed towards the rate
    of the two classes, so a pair rare in the fit (a letter of a language
    or script it never read) starts from how often a token starts there in
    the scripts it did read, not from its byte's rate over every context."""
    byte = np.arange(DIGIT) % COLS
    byte_rate = np.bincount(byte, weights=hits[:DIGIT], minlength=COLS) / np.maximum(
        np.bincount(byte, weights=occ[:DIGIT], minlength=COLS), 1
    )
    w0 = np.empty(FEATURES)
    w0[:DIGIT] = (hits[:DIGIT] + SMOOTHING * byte_rate[byte]) / (occ[:DIGIT] + SMOOTHING)
    if backoff > 0:
        prev = np.arange(DIGIT) // COLS
        pc, bc = byte_class(prev), byte_class(byte)
        cc = pc * BYTE_CLASSES + bc
        n_cc = BYTE_CLASSES * BYTE_CLASSES
        cc_rate = np.bincount(cc, weights=hits[:DIGIT], minlength=n_cc) / np.maximum(
            np.bincount(cc, weights=occ[:DIGIT], minlength=n_cc), 1
        )
        # the byte after its previous byte's class, smoothed towards the classes' rate
        cb = pc * COLS + byte
        cells = np.arange(BYTE_CLASSES * COLS)
        cell_cc = (cells // COLS) * BYTE_CLASSES + byte_class(cells % COLS)
        cb_hits = np.bincount(cb, weights=hits[:DIGIT], minlength=len(cells))
        cb_occ = np.bincount(cb, weights=occ[:DIGIT], minlength=len(cells))
        cb_rate = (cb_hits + SMOOTHING * cc_rate[cell_cc]) / (cb_occ + SMOOTHING)
        wide = ((prev >= 0x80) & (prev < 0x100)) | (byte >= 0x80)
        w0[:DIGIT][wide] = (hits[:DIGIT][wide] + backoff * cb_rate[cb][wide]) / (
            occ[:DIGIT][wide] + backoff
        )
    w0[START * COLS : (START + 1) * COLS] = 1.0 - 1.0 / SCALE  # a first byte starts a token
    digits = np.arange(48, 58)
    pairs = (digits[:, None] * COLS + digits[None, :]).ravel()
    pair_rate = hits[pairs].sum() / max(occ[pairs].sum(), 1)
    group_rate = hits[DIGIT] / max(occ[DIGIT], 1)
    w0[DIGIT] = np.clip(group_rate - pair_rate, 0.0, 1.0 - 1.0 / SCALE)
    # the punctuation weight: what the context adds to its pairs' rate without it
    letters = np.array([*range(65, 91), *range(97, 123)])
    punct = np.frombuffer(PUNCT_BYTES, dtype=np.uint8).astype(np.int64)
    pairs = (punct[:, None] * COLS + letters[None, :]).ravel()
    pair_rate = hits[pairs].sum() / max(occ[pairs].sum(), 1)
    context_rate = hits[PUNCT] / max(occ[PUNCT], 1)
    w0[PUNCT] = np.clip(context_rate - pair_rate, 0.0, 1.0 - 1.0 / SCALE)
    return w0


def start_frequencies(enc: Encoded, train_units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    occ, hits = enc.start_counts(train_units[enc.unit_of_byte])
    return frequencies(occ, hits), occ


#: The parts of a ridge variant (``ridge_prior``), joined with ``+``.
PRIOR_PARTS = ("ridge", "rpow", "rfloor", "rinfo")


def ridge_prior(occ: np.ndarray, variant: str = "", w0: np.ndarray | None = None) -> np.ndarray:
    """Each weight's ridge strength, from its pair's share of the training
    bytes (``occ / occ.sum()``). ``""`` or ``base``: ``RIDGE * share * 1e3``
    (fit.py's fit). A variant joins parts with ``+``: ``ridgeN`` multiplies
    the whole by N; ``rpowP`` takes share ** P instead (P < 1 ties rare pairs
    closer to their start frequencies than their share does); ``rfloorF``
    floors each occurring pair's share at F times the median share of the
    occurring pairs; ``rinfoE`` divides each share by ``w0 * (1 - w0) + E``
    (``w0``: the start frequencies), the precision of a measured rate, so a
    rate near 0 or 1 is held harder than one near a half. ``rpow``,
    ``rfloor`` and ``rinfo`` rescale so the prior's total stays ``RIDGE *
    1e3`` (times ``ridgeN``); pairs that never occur keep 0 (no training
    text has them, so no term of the loss moves them)."""
    ridge, power, floor, info = 1.0, 1.0, 0.0, 0.0
    for part in filter(None, variant.split("+")):
        if part == "base":
            continue
        try:
            if part.startswith("rpow"):
                power = float(part[4:])
            elif part.startswith("rfloor"):
                floor = float(part[6:])
            elif part.startswith("rinfo"):
                info = float(part[5:])
                if info <= 0:
                    raise ValueError(part)
            elif part.startswith("ridge"):
                ridge = float(part[5:])
            else:
                raise ValueError(part)
        except ValueError:
            raise ValueError(f"ridge variant {variant!r}: unknown part {part!r}") from None
    if info > 0 and w0 is None:
        raise ValueError(f"ridge variant {variant!r}: rinfo needs the start frequencies (w0)")
    share = occ / occ.sum()
    seen = share > 0
    shaped = share.copy()
    if floor > 0:
        shaped[seen] = np.maximum(shaped[seen], floor * float(np.median(share[seen])))
    if power != 1.0:
        shaped[seen] = shaped[seen] ** power
    if w0 is not None and info > 0:
        shaped[seen] /= w0[seen] * (1.0 - w0[seen]) + info
    shaped *= share.sum() / shaped.sum()
    return RIDGE * ridge * shaped * 1e3


def refine(
    x: sp.csr_matrix,
    y: np.ndarray,
    w0: np.ndarray,
    occ: np.ndarray,
    maxiter: int = 3000,
    sample_weight: np.ndarray | None = None,
    variant: str = "",
) -> np.ndarray:
    """Bounded ridge on relative errors of the totals (each text's squared
    error weighed by ``sample_weight``, mean 1; every text alike without),
    each weight tied to its start frequency by ``ridge_prior(occ, variant, w0)``."""
    inv = 1.0 / y
    if sample_weight is not None:
        inv = inv * np.sqrt(sample_weight / sample_weight.mean())
    xs = sp.diags(inv) @ x  # relative: (Xw - y) / y
    n = len(y)
    prior = ridge_prior(occ, variant, w0)
    fixed = np.zeros(FEATURES, dtype=bool)
    fixed[START * COLS : (START + 1) * COLS] = True

    target = np.ones(n) if sample_weight is None else np.sqrt(sample_weight / sample_weight.mean())

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        r = xs @ w - target
        d = w - w0
        value = float(r @ r) / n + float(prior @ (d * d))
        grad = 2.0 * (xs.T @ r) / n + 2.0 * prior * d
        grad[fixed] = 0.0
        return value, grad

    bounds = [(0.0, 1.0 - 1.0 / SCALE)] * FEATURES
    result = scipy.optimize.minimize(
        loss, w0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": maxiter}
    )
    return np.asarray(result.x)


def estimate(x: sp.csr_matrix, weights: np.ndarray, factor: float = 1.0) -> np.ndarray:
    """The core's arithmetic: integer weights summed exactly, rounded half up."""
    q = np.clip(np.rint(weights * SCALE), 0, SCALE - 1)
    total = x @ q
    if factor != 1.0:
        total = np.floor(total * np.rint(factor * SCALE) / SCALE)
    return np.floor((total + SCALE // 2) / SCALE)


def _stats(est: np.ndarray, exact: np.ndarray) -> dict[str, float]:
    err = (est - exact) / exact
    a = np.abs(err)
    return {
        "n": len(err),
        "p50": float(np.percentile(a, 50)) if len(a) else float("nan"),
        "p95": float(np.percentile(a, 95)) if len(a) else float("nan"),
        "p99": float(np.percentile(a, 99)) if len(a) else float("nan"),
        "under": float(np.mean(err < 0)) if len(a) else float("nan"),
        "bias": float(np.sum(est) / np.sum(exact) - 1) if len(a) else float("nan"),
    }


def evaluate(units: list[corpus.Unit], enc: Encoded, est: np.ndarray) -> dict[str, dict]:
    splits = np.array([u.split for u in units])
    kinds = np.array([u.kind for u in units])
    groups = np.array([f"{u.kind}/{u.group}" for u in units])
    big = enc.exact >= MIN_TOKENS
    report: dict[str, dict] = {}
    for name, split in (("train", "train"), ("in-domain", "eval"), ("unseen", "unseen")):
        rows = (splits == split) & big
        entry = {"message": _stats(est[rows], enc.exact[rows])}
        # per group (session or file): totals of all its texts
        sel = splits == split
        _, inverse = np.unique(groups[sel], return_inverse=True)
        e_sum = np.bincount(inverse, weights=est[sel])
        x_sum = np.bincount(inverse, weights=enc.exact[sel])
        keep = x_sum >= 200
        entry["session"] = _stats(e_sum[keep], x_sum[keep])
        entry["kinds"] = {
            k: _stats(est[rows & (kinds == k)], enc.exact[rows & (kinds == k)])
            for k in sorted(set(kinds[rows]))
        }
        report[name] = entry
    # sessions of real agent runs alone (held out)
    sel = (splits == "eval") & (kinds == "transcript")
    _, inverse = np.unique(groups[sel], return_inverse=True)
    report["in-domain"]["runs"] = _stats(
        np.bincount(inverse, weights=est[sel]), np.bincount(inverse, weights=enc.exact[sel])
    )
    return report


def opencode(units: list[corpus.Unit]) -> np.ndarray:
    return np.array([np.floor(len(u.text.encode("utf-16-le")) / 2 / 4 + 0.5) for u in units])


def fit_family(units: list[corpus.Unit], family: str, write: bool, maxiter: int = 3000) -> dict:
    t0 = time.perf_counter()
    enc = Encoded(units, family)
    train = np.array([u.split == "train" for u in units])
    if write:
        w0, occ = start_frequencies(enc, train)
        rows = train & (enc.exact > 0)
        weights = refine(enc.x[rows], enc.exact[rows], w0, occ, maxiter)
        fit_rows = rows & (enc.exact >= MIN_TOKENS)
        ratio = enc.exact[fit_rows] / np.maximum(estimate(enc.x[fit_rows], weights), 1)
        factor = max(1.0, float(np.quantile(ratio, CONSERVATIVE_QUANTILE)))
        write_table(family, weights, factor)
        base = evaluate(units, enc, estimate(enc.x, w0))
    weights, factor = read_table(family)
    report = {
        "family": family,
        "encode_seconds": enc.encode_seconds,
        "fit_seconds": time.perf_counter() - t0,
        "conservative_factor": factor,
        "fitted": evaluate(units, enc, estimate(enc.x, weights)),
        "conservative": evaluate(units, enc, estimate(enc.x, weights, factor)),
        "opencode": evaluate(units, enc, opencode(units)),
    }
    if write:
        report["start_frequencies_only"] = base
    return report


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def markdown(reports: list[dict]) -> str:
    head = (
        "| family | estimate | in-domain p50 / p95 / p99 | under | unseen p50 / p95 / p99 "
        "| under | runs p95 | files p95 |\n|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in reports:
        for name in ("fitted", "conservative", "opencode"):
            ev = r[name]
            i, u = ev["in-domain"]["message"], ev["unseen"]["message"]
            lines.append(
                f"| {r['family']} | {name} | {_pct(i['p50'])} / {_pct(i['p95'])} / {_pct(i['p99'])}"
                f" | {_pct(i['under'])} | {_pct(u['p50'])} / {_pct(u['p95'])} / {_pct(u['p99'])}"
                f" | {_pct(u['under'])} | {_pct(ev['in-domain']['runs']['p95'])}"
                f" | {_pct(ev['in-domain']['session']['p95'])} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", action="append", choices=vocab.FAMILIES)
    parser.add_argument("--check", action="store_true", help="evaluate the shipped tables only")
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument("--maxiter", type=int, default=3000, help="refinement iterations")
    args = parser.parse_args(argv)
    units = corpus.units()
    digest = hashlib.sha256()
    for u in units:
        digest.update(f"{u.kind}\0{u.group}\0{u.split}\0{u.text}\0".encode())
    print(f"corpus: {len(units):,} texts, sha256 {digest.hexdigest()[:16]}", file=sys.stderr)
    reports = []
    for family in args.family or vocab.FAMILIES:
        report = fit_family(units, family, write=not args.check, maxiter=args.maxiter)
        reports.append(report)
        ev = report["fitted"]
        print(
            f"{family}: in-domain p95 {_pct(ev['in-domain']['message']['p95'])}, "
            f"unseen p95 {_pct(ev['unseen']['message']['p95'])}, "
            f"runs p95 {_pct(ev['in-domain']['runs']['p95'])} "
            f"({report['fit_seconds']:.0f} s)",
            file=sys.stderr,
        )
    print(markdown(reports))
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
