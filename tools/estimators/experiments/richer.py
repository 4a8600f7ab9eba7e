"""Richer byte-level estimators than the bigram table, fitted and evaluated
exactly as tools/estimators/fit.py does (train split only, fit.evaluate).

    python tools/estimators/experiments/richer.py --family o200k --variant bigram --variant tri16
    python tools/estimators/experiments/richer.py --diagnose --family o200k

Every variant is additive: a text's estimate is 1 (its first byte always
starts a token) plus, for every later byte, the sum of one weight from each of
its tables. Table 0 is the base (u16 in 1/65536, bounds [0, 1)); further
tables are signed corrections (i16 in 1/32768, bounds [-1, 1)). Indices are
computed from the input bytes only (see VARIANTS for each one's Rust cost).

Fitting per variant, as fit.py: (1) start frequencies: the base table's
smoothed frequency of token starts, each further table the smoothed mean of
what the tables before it leave (pulled to 0 for rare slots); (2) bounded
L-BFGS-B on each training text's relative error with a ridge pulling every
weight towards (1) in proportion to how often its slot was seen.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.optimize
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import data
import fit

SCALE = 1 << 16
CSCALE = 1 << 15
SMOOTHING = fit.SMOOTHING
RIDGE = fit.RIDGE
START = 256
RUNS = fit.RUNS

# Byte classes (for class-context tables): 0 lower, 1 upper, 2 digit, 3 space,
# 4 tab, 5 newline/CR, 6 quote, 7 bracket, 8 . , ; :, 9 other ASCII punct,
# 10 UTF-8 continuation, 11 UTF-8 lead, 12 underscore, 13 - , 14 / \, 15 start.
CLASS = np.full(257, 9, dtype=np.int64)
# ASCII classes by character set; the first set holding a byte wins.
_ASCII_CLASSES = (
    (0, str.islower),
    (1, str.isupper),
    (2, str.isdigit),
    (3, " ".__contains__),
    (4, "\t".__contains__),
    (5, "\r\n".__contains__),
    (6, "\"'`".__contains__),
    (7, "()[]{}<>".__contains__),
    (8, ".,;:".__contains__),
    (12, "_".__contains__),
    (13, "-".__contains__),
    (14, "/\\".__contains__),
)
for b in range(256):
    if b >= 0xC0:
        CLASS[b] = 11
    elif b >= 0x80:
        CLASS[b] = 10
    else:
        CLASS[b] = next((k for k, test in _ASCII_CLASSES if test(chr(b))), 9)
CLASS[256] = 15


class Context:
    """Per-byte context arrays (int64), sentinel 256 outside the text."""

    def __init__(self, d: data.FamilyData) -> None:
        b = d.data.astype(np.int64)
        n = len(b)
        self.b = b
        pos = np.arange(n) - np.repeat(d.offsets[:-1], d.sizes)
        self.pos = pos

        def back(k: int) -> np.ndarray:
            out = np.full(n, START, dtype=np.int64)
            out[k:] = b[:-k]
            out[pos < k] = START
            return out

        def ahead(k: int) -> np.ndarray:
            out = np.full(n, START, dtype=np.int64)
            out[:-k] = b[k:]
            rem = np.repeat(d.offsets[1:], d.sizes) - np.arange(n) - 1  # bytes after this one
            out[rem < k] = START
            return out

        self.p1, self.p2, self.p3, self.n1 = back(1), back(2), back(3), ahead(1)
        # fit.py's bigram row: the previous byte, or a run row inside a run of ' ' / '\t'
        row = self.p1.copy()
        for k, r in enumerate(RUNS):
            mid = (self.p1 == r) & (b == r) & (self.n1 == r)
            row[mid] = START + 1 + k
        self.row = row
        self.first = d.first
        self.is_run_mid = row > START
        # position inside the current run of letters/digits/UTF-8 (serial in Rust)
        word = np.isin(CLASS[b], [0, 1, 2, 10, 11])
        brk = ~word
        idx = np.arange(n)
        last_brk = np.maximum.accumulate(np.where(brk | d.first, idx, 0))
        wpos = idx - last_brk  # 0 at the break or first byte
        self.wpos = np.where(word, wpos, 0)


def _hash(key: np.ndarray, bits: int) -> np.ndarray:
    return ((key * 0x9E3779B1) & 0xFFFFFFFF) >> (32 - bits)


def bigram_index(c: Context) -> np.ndarray:
    return c.row * 256 + c.b


WORD_CLASSES = [0, 1, 10, 11]  # letters and UTF-8 bytes: a "word" is a run of them
WORD_CAP = 16  # bytes of a word hashed (Rust: one masked 16-byte load), plus its length


def word_table(bits: int):
    """Per word (run of letters/UTF-8 bytes, with the class of the byte before
    it): one hashed slot read at the word's last byte; every other byte reads
    the null slot. agg: every byte of the word maps to the word's slot (init)."""
    null = 1 << bits

    def f(c: Context):
        n = len(c.b)
        word = np.isin(CLASS[c.b], WORD_CLASSES)
        prev_word = np.zeros(n, dtype=bool)
        prev_word[1:] = word[:-1]
        prev_word[c.first] = False
        start = word & ~prev_word
        starts_idx = np.flatnonzero(start)
        wid = np.cumsum(start) - 1
        j = np.arange(n) - starts_idx[np.maximum(wid, 0)]
        R = np.uint64(0x100000001B3)
        pw = np.ones(WORD_CAP, dtype=np.uint64)
        for i in range(1, WORD_CAP):
            pw[i] = pw[i - 1] * R
        v = np.zeros(n, dtype=np.uint64)
        sel = word & (j < WORD_CAP)
        v[sel] = (c.b[sel].astype(np.uint64) + np.uint64(1)) * pw[j[sel]]
        h = (
            np.add.reduceat(np.where(word, v, np.uint64(0)), starts_idx)
            if len(starts_idx)
            else v[:0]
        )
        # word end and length
        end = np.zeros(n, dtype=bool)
        nxt_word = np.zeros(n, dtype=bool)
        nxt_word[:-1] = word[1:]
        nxt_word[:-1] &= ~c.first[1:]
        end = word & ~nxt_word
        ends_idx = np.flatnonzero(end)
        length = ends_idx - starts_idx + 1
        prevcls = CLASS[c.p1[starts_idx]]
        key = (
            h
            ^ (np.minimum(length, 255).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
            ^ (prevcls.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F))
        )
        slot = ((key * np.uint64(0xFF51AFD7ED558CCD)) >> np.uint64(64 - bits)).astype(np.int64)
        ix = np.full(n, null, dtype=np.int64)
        ix[ends_idx] = slot
        ag = np.full(n, null, dtype=np.int64)
        ag[word] = slot[wid[word]]
        return ix, ag

    f.null = null
    return ((1 << bits) + 1, f)


# A variant: name -> (list of (table size, index function), Rust cost text)
def _tri(c: Context) -> np.ndarray:
    return (c.p2 * 259 + c.row) * 256 + c.b


def _quad(c: Context) -> np.ndarray:
    return ((c.p3 * 257 + c.p2) * 259 + c.row) * 256 + c.b


def _look(c: Context) -> np.ndarray:
    return (c.row * 256 + c.b) * 257 + c.n1


VARIANTS = {
    "bigram": ([(259 * 256, bigram_index)], "1 load/byte, 133 KB, no serial dependency (today)"),
    "tri16": (
        [(1 << 16, lambda c: _hash(_tri(c), 16))],
        "1 load + hash (mul, shift)/byte, 128 KB, no serial dependency",
    ),
    "tri18": (
        [(1 << 18, lambda c: _hash(_tri(c), 18))],
        "1 load + hash/byte, 512 KB (L2-sized), no serial dependency",
    ),
    "tri20": (
        [(1 << 20, lambda c: _hash(_tri(c), 20))],
        "1 load + hash/byte, 2 MB (L3), no serial dependency (ceiling probe)",
    ),
    "bi+tri16": (
        [(259 * 256, bigram_index), (1 << 16, lambda c: _hash(_tri(c), 16))],
        "2 loads + hash/byte, 133 + 128 KB, no serial dependency",
    ),
    "bi+tri18": (
        [(259 * 256, bigram_index), (1 << 18, lambda c: _hash(_tri(c), 18))],
        "2 loads + hash/byte, 133 + 512 KB, no serial dependency",
    ),
    "bi+skip": (
        [(259 * 256, bigram_index), (257 * 256, lambda c: c.p2 * 256 + c.b)],
        "2 loads/byte, 133 + 132 KB, no serial dependency",
    ),
    "bi+cls3": (
        [
            (259 * 256, bigram_index),
            (16 * 16 * 256, lambda c: (CLASS[c.p2] * 16 + CLASS[c.p1]) * 256 + c.b),
        ],
        "2 loads/byte (+1 class lookup), 133 + 128 KB, no serial dependency",
    ),
    "bi+look18": (
        [(259 * 256, bigram_index), (1 << 18, lambda c: _hash(_look(c), 18))],
        "2 loads + hash/byte, 133 + 512 KB, reads 1 byte ahead (piece joins need it)",
    ),
    "bi+tri18+quad18": (
        [
            (259 * 256, bigram_index),
            (1 << 18, lambda c: _hash(_tri(c), 18)),
            (1 << 18, lambda c: _hash(_quad(c) ^ 0x5BD1E995, 18)),
        ],
        "3 loads + 2 hashes/byte, 133 + 2 x 512 KB, no serial dependency",
    ),
    "bi+word18": (
        [(259 * 256, bigram_index), word_table(18)],
        "bigram 1 load/byte + 1 load/word, 133 + 512 KB; word ends from a SIMD class mask, "
        "hash of a masked 16-byte load per word (no per-byte chain)",
    ),
    "bi+word20": (
        [(259 * 256, bigram_index), word_table(20)],
        "bigram 1 load/byte + 1 load/word, 133 KB + 2 MB; as bi+word18",
    ),
    "bi+tri18+word20": (
        [(259 * 256, bigram_index), (1 << 18, lambda c: _hash(_tri(c), 18)), word_table(20)],
        "2 loads + hash/byte + 1 load/word, 133 + 512 KB + 2 MB",
    ),
    "bi+wpos": (
        [
            (259 * 256, bigram_index),
            (
                16 * 259 * 256 // 16 * 16,
                lambda c: (np.minimum(c.wpos, 15) * 259 + c.row) * 256 + c.b,
            ),
        ],
        "2 loads/byte, 133 KB + 2.1 MB, serial: word-position counter (1-cycle chain)",
    ),
    "bi+wpos-cls": (
        [
            (259 * 256, bigram_index),
            (16 * 16 * 256, lambda c: (np.minimum(c.wpos, 15) * 16 + CLASS[c.p1]) * 256 + c.b),
        ],
        "2 loads/byte, 133 + 128 KB, serial: word-position counter (1-cycle chain)",
    ),
}


class Model:
    def __init__(self, tables: list[tuple[int, object]], c: Context, d: data.FamilyData):
        self.sizes = [s for s, _ in tables]
        self.base = np.concatenate([[0], np.cumsum(self.sizes)])
        keep = ~c.first
        self.keep = keep
        self.idx, self.agg = [], []
        for k, (_, f) in enumerate(tables):
            got = f(c)
            ix, ag = got if isinstance(got, tuple) else (got, got)
            self.idx.append(np.asarray(ix)[keep] + self.base[k])
            self.agg.append(np.asarray(ag)[keep] + self.base[k])
        # slots fixed at 0 (a table's "no entry" slot)
        self.null = [getattr(f, "null", None) for _, f in tables]
        for k, ix in enumerate(self.idx):
            assert ix.min() >= self.base[k] and ix.max() < self.base[k + 1], k
        self.unit = d.unit_of_byte[keep]
        self.starts = d.starts[keep].astype(np.float64)
        self.n_units = len(d.sizes)
        self.nonempty = (d.sizes > 0).astype(np.float64)
        P = self.base[-1]
        rows = np.concatenate([self.unit] * len(self.idx))
        cols = np.concatenate(self.idx)
        self.x = sp.csr_matrix(
            (np.ones(len(rows), dtype=np.float64), (rows, cols)), shape=(self.n_units, P)
        )
        self.x.sum_duplicates()
        self.P = P

    def init(self, train_units: np.ndarray, prior_bytes: np.ndarray | None = None):
        """Start frequencies: base, then residual means for each further table."""
        inb = train_units[self.unit]
        P = self.P
        w0 = np.zeros(P)
        occ = np.zeros(P)
        pred = np.zeros(inb.sum())
        y = self.starts[inb]
        for k, ix in enumerate(self.idx):
            ix_t = ix[inb]
            o = np.bincount(ix_t - self.base[k], minlength=self.sizes[k]).astype(np.float64)
            if k == 0:
                hits = np.bincount(ix_t, weights=y, minlength=P)[self.base[0] : self.base[1]]
                if prior_bytes is None:  # the byte's overall rate
                    byte = self._byte[inb]
                    rate = np.bincount(byte, weights=y, minlength=256) / np.maximum(
                        np.bincount(byte, minlength=256), 1
                    )
                    pr = rate[byte]
                else:
                    pr = prior_bytes[inb]
                prior = np.bincount(ix_t, weights=pr, minlength=P)[: self.sizes[0]] / np.maximum(
                    o, 1
                )
                w = (hits + SMOOTHING * prior) / (o + SMOOTHING)
            else:
                ag_t = self.agg[k][inb] - self.base[k]
                res = np.bincount(ag_t, weights=y - pred, minlength=self.sizes[k])
                w = res / (o + SMOOTHING)
                if self.null[k] is not None:
                    w[self.null[k]] = 0.0
            w0[self.base[k] : self.base[k + 1]] = w
            occ[self.base[k] : self.base[k + 1]] = o
            pred = pred + w[ix_t - self.base[k]]
        return w0, occ

    def bounds(self):
        lo = np.full(self.P, -1.0)
        hi = np.full(self.P, 1.0 - 1.0 / CSCALE)
        lo[: self.sizes[0]] = 0.0
        hi[: self.sizes[0]] = 1.0 - 1.0 / SCALE
        for k, nl in enumerate(self.null):
            if nl is not None:
                lo[self.base[k] + nl] = hi[self.base[k] + nl] = 0.0
        return lo, hi

    def refine(
        self,
        rows: np.ndarray,
        w0: np.ndarray,
        occ: np.ndarray,
        maxiter: int = 3000,
        ridge: float = RIDGE,
    ):
        x = self.x[rows]
        y = exact_of(self)[rows]
        inv = 1.0 / y
        xs = sp.diags(inv) @ x
        off = self.nonempty[rows] * inv  # the first byte's 1 token
        n = len(y)
        prior = ridge * occ / self.keep.sum() * 1e3 * len(self.idx)
        xsT = xs.T.tocsr()

        def loss(w):
            r = xs @ w + off - 1.0
            dd = w - w0
            return float(r @ r) / n + float(prior @ (dd * dd)), 2.0 * (
                xsT @ r
            ) / n + 2.0 * prior * dd

        lo, hi = self.bounds()
        res = scipy.optimize.minimize(
            loss,
            np.clip(w0, lo, hi),
            jac=True,
            method="L-BFGS-B",
            bounds=list(zip(lo, hi)),
            options={"maxiter": maxiter},
        )
        return np.asarray(res.x), res.nit

    def quantized(self, w: np.ndarray) -> np.ndarray:
        """Weights in 1/65536 as the core would sum them (u16 base, i16 corrections x 2)."""
        q = np.empty(self.P)
        s0 = self.sizes[0]
        q[:s0] = np.clip(np.rint(w[:s0] * SCALE), 0, SCALE - 1)
        q[s0:] = np.clip(np.rint(w[s0:] * CSCALE), -CSCALE, CSCALE - 1) * 2
        return q

    def estimate(self, w: np.ndarray) -> np.ndarray:
        total = self.x @ self.quantized(w) + self.nonempty * SCALE
        return np.floor((total + SCALE // 2) / SCALE)


_EXACT = {}


def exact_of(m):
    return _EXACT[id(m)]


def run_variant(name, us, d, c, train, prior_bigram=None, maxiter=3000, ridge=RIDGE):
    tables, cost = VARIANTS[name]
    t0 = time.perf_counter()
    m = Model(tables, c, d)
    m._byte = c.b[m.keep]
    _EXACT[id(m)] = d.exact
    pb = None
    if name.startswith("tri") and prior_bigram is not None:
        pb = prior_bigram[m.keep]  # smoothed towards the bigram start frequencies
    w0, occ = m.init(train, pb)
    est0 = m.estimate(w0)
    rows = train & (d.exact > 0)
    w, nit = m.refine(rows, w0, occ, maxiter=maxiter, ridge=ridge)
    est = m.estimate(w)
    rep = {
        "variant": name,
        "rust_cost": cost,
        "params": int(m.P),
        "iterations": int(nit),
        "seconds": time.perf_counter() - t0,
        "start_frequencies_only": fit.evaluate(us, d, est0),
        "fitted": fit.evaluate(us, d, est),
    }
    return rep, m, w


def bigram_freq_per_byte(d, c, train):
    """fit.py's smoothed bigram start frequency of every byte (for tri priors)."""
    ix = bigram_index(c)
    inb = train[d.unit_of_byte]
    y = d.starts.astype(np.float64)
    occ = np.bincount(ix[inb], minlength=259 * 256).astype(np.float64)
    hits = np.bincount(ix[inb], weights=y[inb], minlength=259 * 256)
    byte = np.arange(259 * 256) % 256
    rate = np.bincount(byte, weights=hits, minlength=256) / np.maximum(
        np.bincount(byte, weights=occ, minlength=256), 1
    )
    w0 = (hits + SMOOTHING * rate[byte]) / (occ + SMOOTHING)
    return w0[ix]


def line(rep: dict, family: str) -> str:
    ev = rep["fitted"]
    i, u = ev["in-domain"]["message"], ev["unseen"]["message"]
    kinds = {**ev["in-domain"]["kinds"], **ev["unseen"]["kinds"]}
    p = lambda v: f"{100 * v:.1f}"  # noqa: E731
    ks = " ".join(f"{k[:5]}={p(v['p95'])}" for k, v in kinds.items())
    sf = rep["start_frequencies_only"]["in-domain"]["message"]["p95"]
    return (
        f"{family:8} {rep['variant']:16} in {p(i['p50'])}/{p(i['p95'])}/{p(i['p99'])} "
        f"unseen {p(u['p50'])}/{p(u['p95'])}/{p(u['p99'])} "
        f"runs {p(ev['in-domain']['runs']['p95'])} "
        f"files {p(ev['in-domain']['session']['p95'])} | {ks} | sf-only in p95 {p(sf)} "
        f"({rep['iterations']} it, {rep['seconds']:.0f} s)"
    )


def diagnose(us, d, est, family):
    splits = np.array([u.split for u in us])
    kinds = np.array([u.kind for u in us])
    err = np.abs(est - d.exact) / np.maximum(d.exact, 1)
    buckets = [(20, 50), (50, 200), (200, 10**9)]
    out = {}
    for split in ("eval", "unseen"):
        sel = (splits == split) & (d.exact >= 20)
        p95 = np.percentile(err[sel], 95)
        tail = sel & (err > p95)
        for k in [*sorted(set(kinds[sel])), "ALL"]:
            ks = sel & ((kinds == k) if k != "ALL" else True)
            row = {}
            for lo, hi in buckets:
                bs = ks & (d.exact >= lo) & (d.exact < hi)
                row[f"{lo}-{hi if hi < 10**9 else ''}"] = {
                    "n": int(bs.sum()),
                    "p50": float(np.percentile(err[bs], 50)) if bs.any() else None,
                    "p95": float(np.percentile(err[bs], 95)) if bs.any() else None,
                    "tail_share": float((tail & bs).sum() / max(tail.sum(), 1)),
                }
            out[f"{split}/{k}"] = row
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", action="append", default=None)
    ap.add_argument("--variant", action="append", default=None)
    ap.add_argument("--diagnose", action="store_true")
    ap.add_argument("--maxiter", type=int, default=3000)
    ap.add_argument("--ridge", type=float, default=RIDGE)
    ap.add_argument("--out", type=Path, default=Path("/tmp/est-exp-results.jsonl"))
    args = ap.parse_args(argv)
    us = data.units()
    train = np.array([u.split == "train" for u in us])
    for family in args.family or ["o200k"]:
        d = data.FamilyData(us, family)
        if args.diagnose:
            enc = fit.Encoded(us, family)
            weights, _ = fit.read_table(family)
            est = fit.estimate(enc.x, weights)
            diag = diagnose(us, d, est, family)
            Path(f"/tmp/est-exp-diag-{family}.json").write_text(json.dumps(diag, indent=1))
            for key, row in diag.items():
                print(
                    f"{key:24} "
                    + "  ".join(
                        f"{b}: n={v['n']:5} p95={100 * (v['p95'] or 0):5.1f} "
                        f"tail={100 * v['tail_share']:4.1f}%"
                        for b, v in row.items()
                    )
                )
            continue
        c = Context(d)
        pb = bigram_freq_per_byte(d, c, train)
        for name in args.variant or ["bigram"]:
            rep, _, _ = run_variant(name, us, d, c, train, pb, args.maxiter, args.ridge)
            rep["family"] = family
            rep["ridge"] = args.ridge
            print(line(rep, family), flush=True)
            with args.out.open("a") as fh:
                fh.write(json.dumps(rep) + "\n")


if __name__ == "__main__":
    main()
