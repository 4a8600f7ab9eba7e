"""How much of a table's change on a kind is noise: the change of the p95
per message between two tables, resampled by file or session (the held-out
groups of the kind, drawn with replacement), on mix.py's texts and cached
encodings (run mix.py for the family first).

    python tools/estimators/experiments/noise.py --family deepseek \\
        --before /tmp/deepseek-stop49.bin --kind prose --kind code

``--after`` defaults to the shipped table. Prints the p95 under each table
and the 90% interval of the change, in points.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit
import mix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", required=True)
    parser.add_argument("--before", type=Path, required=True, help="a table file")
    parser.add_argument("--after", type=Path, help="a table file (default: the shipped one)")
    parser.add_argument("--kind", action="append", required=True)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args(argv)
    # mix.py pickles its encodings as a script: its class is __main__'s there.
    sys.modules["__main__"].Encoded = mix.Encoded
    us = mix.units()
    enc = mix.load(args.family, us)
    before = fit.estimate(enc.x, fit.read_table(args.family, args.before)[0])
    after = fit.estimate(enc.x, fit.read_table(args.family, args.after)[0])
    kinds = np.array([u.kind for u in us])
    splits = np.array([u.split for u in us])
    groups = np.array([f"{u.kind}/{u.group}" for u in us])
    rng = np.random.default_rng(0)
    for kind in args.kind:
        sel = (kinds == kind) & (splits != "train") & (enc.exact >= fit.MIN_TOKENS)
        if not sel.any():
            raise SystemExit(f"no held-out text of kind {kind!r}")
        exact = enc.exact[sel]
        off_b = np.abs(before[sel] / exact - 1)
        off_a = np.abs(after[sel] / exact - 1)
        _, group = np.unique(groups[sel], return_inverse=True)
        members = [np.flatnonzero(group == g) for g in range(group.max() + 1)]
        change = []
        for _ in range(args.draws):
            pick = np.concatenate([members[g] for g in rng.integers(0, len(members), len(members))])
            change.append(np.percentile(off_a[pick], 95) - np.percentile(off_b[pick], 95))
        lo, hi = 100 * np.percentile(change, [5, 95])
        print(f"{kind}: p95 {100 * np.percentile(off_b, 95):.1f}% -> "
              f"{100 * np.percentile(off_a, 95):.1f}%, change 90% interval {lo:+.1f} .. {hi:+.1f} "
              f"({len(members)} groups)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
