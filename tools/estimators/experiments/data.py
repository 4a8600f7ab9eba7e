"""Cached corpus and per-family byte data for the estimator experiments.

The corpus (corpus.units()) is pickled once to /tmp so every experiment sees
the same texts (the diff kind reads this worktree's git history at HEAD, which
commits would otherwise change). Per family: the texts' bytes, unit offsets,
where the exact tokenizer starts a token, and exact counts.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import corpus  # noqa: E402
import vocab  # noqa: E402

CACHE = Path("/tmp/est-exp-cache")


def units() -> list[corpus.Unit]:
    CACHE.mkdir(exist_ok=True)
    path = CACHE / "units.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    out = corpus.units()
    path.write_bytes(pickle.dumps(out))
    return out


class FamilyData:
    """data (uint8 bytes of all texts), offsets (len n+1), starts (bool per
    byte), exact (tokens per text), unit_of_byte."""

    def __init__(self, us: list[corpus.Unit], family: str) -> None:
        path = CACHE / f"{family}.npz"
        raw = [u.text.encode() for u in us]
        sizes = np.array([len(b) for b in raw], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])
        self.data = np.frombuffer(b"".join(raw), dtype=np.uint8)
        if path.exists():
            z = np.load(path)
            self.starts, self.exact = z["starts"], z["exact"]
        else:
            encode, lengths = vocab.encoder(family)
            ids = encode([u.text for u in us])
            token_len = np.asarray(lengths, dtype=np.int64)
            self.exact = np.array([len(i) for i in ids], dtype=np.float64)
            starts = np.zeros(len(self.data), dtype=bool)
            for u, toks in enumerate(ids):
                if toks:
                    pos = np.cumsum(token_len[np.asarray(toks[:-1], dtype=np.int64)])
                    starts[self.offsets[u]] = True
                    starts[self.offsets[u] + pos[pos < sizes[u]]] = True
            self.starts = starts
            np.savez(path, starts=starts, exact=self.exact)
        self.sizes = sizes
        self.unit_of_byte = np.repeat(np.arange(len(us)), sizes)
        self.first = np.zeros(len(self.data), dtype=bool)
        self.first[self.offsets[:-1][sizes > 0]] = True
        self.last = np.zeros(len(self.data), dtype=bool)
        self.last[self.offsets[1:][sizes > 0] - 1] = True
