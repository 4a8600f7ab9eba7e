"""The punctuation weight's smaller test (docs/estimators.md, "The
punctuation weight"): variants of fit.PUNCT_BYTES fitted with fit.py's steps
on the same few thousand training messages of heldout.py (the fitted types'
training half and the fitted agent runs), measured on the types no fit read
(logs, stack traces, diffs) and on the held-out runs and fitted types' other
half.

    python tools/estimators/experiments/punct.py --family o200k --train 4000 --maxiter 200
    python tools/estimators/experiments/punct.py --variant "" --variant "/" --variant "/.\\"

A variant is the set of bytes between the space or punctuation and the letter
that the weight reads ("" is the table without the weight; fit.PUNCT_BYTES,
every ASCII punctuation byte, is the one shipped). Nothing is written.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corpus
import fit
import heldout

NEVER_FITTED = ("log", "stack-trace", "diff")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="o200k", choices=("o200k", "cl100k"))
    parser.add_argument("--train", type=int, default=4000, help="training messages")
    parser.add_argument("--test", type=int, default=1000, help="messages of each measured type")
    parser.add_argument("--maxiter", type=int, default=200)
    parser.add_argument("--variant", action="append", help='fit.PUNCT_BYTES ("" for none)')
    args = parser.parse_args(argv)
    msgs = heldout.messages(heldout.fetch())
    rng = random.Random(0)
    train = [m for m in msgs if heldout.fitted_on(m)]
    train = rng.sample(train, min(args.train, len(train)))
    test: list[heldout.Message] = []
    for kind in heldout.TYPES:
        pool = [m for m in msgs if m.kind == kind and not heldout.fitted_on(m)]
        # whole sessions, so the session p95 reads something
        sessions = sorted({m.session for m in pool})
        rng.shuffle(sessions)
        picked: list[heldout.Message] = []
        for s in sessions:
            if len(picked) >= args.test:
                break
            picked.extend(m for m in pool if m.session == s)
        test.extend(picked)
    units = [corpus.Unit(m.text, m.kind, m.session, "train") for m in train] + [
        corpus.Unit(m.text, m.kind, m.session, "eval") for m in test
    ]
    n = len(train)
    for variant in args.variant or ["", fit.PUNCT_BYTES.decode()]:
        t0 = time.perf_counter()
        fit.PUNCT_BYTES = variant.encode()
        enc = fit.Encoded(units, args.family)
        rows = np.zeros(len(units), dtype=bool)
        rows[:n] = enc.exact[:n] > 0
        w0, occ = fit.start_frequencies(enc, rows)
        weights = fit.refine(enc.x[rows], enc.exact[rows], w0, occ, args.maxiter)
        est = fit.estimate(enc.x[n:], weights)
        base = fit.estimate(enc.x[n:], w0)
        report = heldout.evaluate(test, est, enc.exact[n:])
        first = heldout.evaluate(test, base, enc.exact[n:])
        print(
            f"variant {variant!r}: punctuation weight {weights[fit.PUNCT]:.3f} "
            f"(start frequencies {w0[fit.PUNCT]:.3f}), {int(enc.punct.sum()):,} contexts, "
            f"[{time.perf_counter() - t0:.0f} s]",
            flush=True,
        )
        for kind, s in report.items():
            f = first[kind]
            print(
                f"  {kind}{' (never fitted)' if kind in NEVER_FITTED else ''}: "
                f"p50/p95/p99 {heldout._pct(s['p50'])} / {heldout._pct(s['p95'])} / "
                f"{heldout._pct(s['p99'])} bias {100 * s['bias']:+.1f}% session p95 "
                f"{heldout._pct(s['session_p95'])} ({s['sessions']} sessions; start frequencies "
                f"only: p95 {heldout._pct(f['p95'])} bias {100 * f['bias']:+.1f}%)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
