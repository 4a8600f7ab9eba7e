"""Replay of three policies against ``ctxcompact ingest`` of the same runs
(docs/benchmarks.md, "Replay against ingest").

    python benches/replay_vs_ingest.py ../shared/data/transcripts/* --big /tmp/big

For each corpus: the wall time of ``ctxcompact ingest DIR -o rows.parquet``
and of ``ctxcompact replay DIR --policy opencode --policy swe-agent --policy
aggressive`` (each a fresh process: the import included), and in one process
the seconds ingest reports (``--json``) against ``cc.replay`` of the three
policies on the rows it wrote. ``--big``: the 1,006,952-part benchmark
transcript (``generate_table(2000, 500, seed=7, mean_output_chars=1500)``)
written once as OpenCode JSONL (ingested) and as Parquet (replayed) in that
folder. Each figure is the best of ``--rounds``. ``--tune CONTEXT``: instead,
the seconds of one ``cc.tune`` of the three presets over each corpus at
that window (``workers=2``), each round; ``--pooled`` sends the live
store's counting to a pool thread, as it was before ``parallel::run_small``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ctxcompact as cc
import pyarrow.parquet as pq
from ctxcompact import formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.transcript import Transcript

POLICIES = ("opencode", "swe-agent", "aggressive")
CLI = [sys.executable, "-m", "ctxcompact.cli"]


def wall(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stdout


def big_corpus(folder: Path) -> tuple[Path, Path]:
    """The benchmark transcript as OpenCode JSONL (one file) and as Parquet."""
    folder.mkdir(parents=True, exist_ok=True)
    jsonl, parquet = folder / "sessions.jsonl", folder / "rows.parquet"
    if not jsonl.exists() or not parquet.exists():
        table = generate_table(2000, 500, seed=7, mean_output_chars=1500)
        pq.write_table(table, parquet)
        formats.write(Transcript(table).to_sessions(), jsonl, "opencode")
    return jsonl, parquet


def measure(name: str, source: Path, replayed: Path | None, window: list[str],
            limits: dict[str, int], rounds: int) -> dict[str, object]:  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        rows = Path(tmp) / "rows.parquet"
        ingest = [*CLI, "ingest", str(source), "-o", str(rows), "--json"]
        ingest_wall, ingest_in = [], []
        for _ in range(rounds):
            rows.unlink(missing_ok=True)
            seconds, out = wall(ingest)
            ingest_wall.append(seconds)
            ingest_in.append(json.loads(out)["seconds"])
        target = replayed or source
        policies = [a for p in POLICIES for a in ("--policy", p)]
        replay_wall = [wall([*CLI, "replay", str(target), *window, *policies, "--json"])[0]
                       for _ in range(rounds)]  # fmt: skip
        table = pq.read_table(replayed or rows)
        replay_in = []
        for _ in range(rounds):
            start = time.perf_counter()
            for p in POLICIES:
                cc.replay(Transcript(table), p, limits=limits)
            replay_in.append(time.perf_counter() - start)
    return {
        "corpus": name, "rows": table.num_rows,
        "ingest_cli_s": min(ingest_wall), "replay3_cli_s": min(replay_wall),
        "ingest_s": min(ingest_in), "replay3_s": min(replay_in),
    }  # fmt: skip


def tune_point(corpus: Path, context: int, rounds: int, pooled: bool) -> list[float]:
    import ctxcompact._core as _core
    from ctxcompact.formats import read_sessions

    real = _core.count_units
    if pooled:
        _core.count_units = lambda values, method="opencode", threads=None: real(values, method, 2)
    table = read_sessions(corpus).table
    grid = {"preset": list(POLICIES), "context": [context]}
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        cc.tune(table, grid, limits={"context": 0, "output": 4_000}, workers=2)
        seconds.append(round(time.perf_counter() - start, 2))
    _core.count_units = real
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("corpora", nargs="*", type=Path)
    parser.add_argument("--big", type=Path, help="folder for the benchmark transcript's files")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tune", type=int, metavar="CONTEXT")
    parser.add_argument("--pooled", action="store_true")
    args = parser.parse_args()
    if args.tune is not None:
        for c in args.corpora:
            print(c.name, tune_point(c, args.tune, args.rounds, args.pooled))
        return
    small = ["--context", "32000", "--output-limit", "4000"]
    results = [measure(c.name, c, None, small, {"context": 32_000, "output": 4_000}, args.rounds)
               for c in args.corpora if c.is_dir()]  # fmt: skip
    if args.big is not None:
        jsonl, parquet = big_corpus(args.big)
        results.append(measure("benchmark transcript", jsonl, parquet,
                               ["--context", "200000", "--output-limit", "8000"],
                               {"context": 200_000, "output": 8_000}, args.rounds))  # fmt: skip
    print("| corpus | rows | ingest (CLI) | 3 policies (CLI) | ingest (its seconds) "
          "| 3 policies (`cc.replay`) | replay / ingest |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in results:
        ratio = float(r["replay3_s"]) / float(r["ingest_s"])  # type: ignore[arg-type]
        print(f"| {r['corpus']} | {r['rows']:,} | {r['ingest_cli_s']:.2f} s | "
              f"{r['replay3_cli_s']:.2f} s | {r['ingest_s']:.2f} s | {r['replay3_s']:.2f} s | "
              f"{ratio:.1f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
