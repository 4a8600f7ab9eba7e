"""Where two tables' estimates differ on some texts: per file, per pair of
byte classes and per byte pair, each byte's weight less whether the exact
tokenizer starts a token there, summed and in % of the exact tokens
(docs/estimators.md, "Why /var/log lost").

    python tools/estimators/experiments/residuals.py before.bin after.bin
    python tools/estimators/experiments/residuals.py before.bin after.bin --source stack-trace

``--source varlog`` (the default) reads this machine's /var/log as corpus.py
does, ``--source other-lang`` its man pages in the other languages (pl, it,
pt_BR, cs, tr; fitted on 75% of the files since stop 51); another value is a
heldout.py type (its first 600 messages). The
tables are files in fit.py's format (``git show REV:rust/assets/estimators/
o200k.bin > before.bin``). Nothing is written.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corpus
import fit


def _classes(b: np.ndarray) -> np.ndarray:
    """lower a, upper A, digit 9, space _, line end n, non-ASCII u (lead
    bytes L: 0xC3, E: 0xC4/0xC5, H: 0xEA-0xED), a start row S, anything else o."""
    out = np.full(len(b), "o", dtype=object)
    out[(b >= 97) & (b <= 122)] = "a"
    out[(b >= 65) & (b <= 90)] = "A"
    out[(b >= 48) & (b <= 57)] = "9"
    out[b == 32] = "_"
    out[b == 10] = "n"
    out[(b >= 128) & (b < 256)] = "u"  # UTF-8 continuation bytes and other leads
    out[b == 0xC3] = "L"  # Latin-1 Supplement lead (é, ã, ç, ü)
    out[(b == 0xC4) | (b == 0xC5)] = "E"  # Latin Extended-A lead (ą, ł, č, ş, ğ)
    out[(b >= 0xEA) & (b <= 0xED)] = "H"  # Hangul syllables' lead bytes (U+AC00-D7A3)
    out[b >= 256] = "S"
    return out


#: corpus.py's other-lang man pages (units() reads the same languages).
OTHER_LANG = corpus.OTHER_LANG


def texts(source: str) -> list[corpus.Unit]:
    if source == "varlog":
        rng = random.Random(0)
        logs = corpus._files([Path("/var/log")], ("*.log", "history.log", "term.log"), rng)
        return [u for u in corpus._from_files("log", logs, rng) if u.text.strip()]
    if source == "other-lang":  # corpus.py's man pages in languages never fitted on
        rng = random.Random(0)
        return [u for u in corpus._man(source, OTHER_LANG, rng) if u.text.strip()]
    import heldout

    msgs = [m for m in heldout.messages(heldout.fetch()) if m.kind == source][:600]
    return [corpus.Unit(m.text, m.kind, m.session, "unseen") for m in msgs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--family", default="o200k")
    parser.add_argument("--source", default="varlog")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    units = texts(args.source)
    enc = fit.Encoded(units, args.family)
    tables = {"before": fit.read_table(args.family, args.before)[0]}
    tables["after"] = fit.read_table(args.family, args.after)[0]
    big = enc.exact >= fit.MIN_TOKENS
    groups = np.array([u.group for u in units])
    if args.source == "other-lang":  # per language, not per file
        groups = np.array([g.split("/")[4] for g in groups])
    excess = {}
    for name, w in tables.items():
        est = fit.estimate(enc.x, w)
        s = fit._stats(est[big], enc.exact[big])
        print(f"{name}: p50 {100 * s['p50']:.1f}% p95 {100 * s['p95']:.1f}% "
              f"bias {100 * s['bias']:+.2f}% under {100 * s['under']:.0f}% "
              f"(digit {w[fit.DIGIT]:.3f}, punct {w[fit.PUNCT]:.3f})")  # fmt: skip
        for g in sorted(set(groups))[:10]:
            m = groups == g
            bias = est[m].sum() / enc.exact[m].sum() - 1
            print(f"    {g}: {m.sum()} texts, bias {100 * bias:+.2f}%")
        excess[name] = (
            w[enc.feature] + w[fit.DIGIT] * enc.group + w[fit.PUNCT] * enc.punct - enc.starts
        )
    total = enc.exact.sum()
    prev, byte = enc.feature // fit.COLS, enc.feature % fit.COLS
    key = np.char.add(_classes(prev).astype(str), _classes(byte).astype(str))
    key = np.where(enc.punct, np.char.add("P:", key), key)
    rows = []
    for k in np.unique(key):
        m = key == k
        a, b = excess["before"][m].sum() / total, excess["after"][m].sum() / total
        rows.append((b - a, str(k), int(m.sum()), a, b))
    rows.sort()
    print("byte classes (P: the punctuation context), excess before -> after:")
    for d, k, n, a, b in rows[: args.top // 2] + rows[-args.top // 2 :]:
        print(f"  {k:6s} {n:8d} bytes {100 * a:+.2f}% -> {100 * b:+.2f}% ({100 * d:+.2f})")
    rows = []
    for f in np.unique(enc.feature):
        m = enc.feature == f
        a, b = excess["before"][m].sum() / total, excess["after"][m].sum() / total
        rows.append((b - a, int(f), int(m.sum()), a, b, float(enc.starts[m].mean())))
    rows.sort(key=lambda r: -abs(r[0]))
    print("byte pairs that moved most:")
    for _, f, n, a, b, rate in rows[: args.top]:
        p = f // fit.COLS
        pair = (bytes([p]) if p < 256 else f"<row {p}>".encode()) + bytes([f % fit.COLS])
        print(f"  {pair!r:12s} {n:7d} bytes, start rate {rate:.2f}, weight "
              f"{tables['before'][f]:.2f} -> {tables['after'][f]:.2f}: "
              f"{100 * a:+.2f}% -> {100 * b:+.2f}%")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
