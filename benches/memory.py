"""Peak memory of each scan beyond its input, per row (one fresh process per scan).

    python benches/memory.py [sessions]      # default 2000 sessions x 500 parts
    python benches/memory.py --ingest 1 4 10 # JSONL ingest of 1, 4 and 10 GB files
    python benches/memory.py --ingest-claude 0.5 1 2  # one Claude Code session of each size

``--ingest`` writes an OpenCode export of each size (distinct session ids,
into a temporary folder: it needs about twice the largest size free) and
reports the peak resident size of ``ctxcompact ingest`` streaming it into
Parquet, beside reading it whole (``read_sessions``) for the sizes up to 2 GB.
``--ingest-claude`` does the same with a Claude Code file holding one long
session (tool calls answered on the next line, a snapshot line without a
``sessionId`` every few events): the file that used to be read whole.

The transcript is written to a Parquet file first; each child process reads
it, notes its resident size, runs one scan and reports the peak resident
size (VmHWM, reset after the read) minus that baseline. Linux only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

SCANS = ("prune", "filter_pivot", "estimate_messages", "estimate_tokens_array")


def _hwm_kb() -> int:
    """Peak resident size since the last reset (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def stream_child(path: str) -> None:
    """Peak memory of the Parquet streaming runner, which never loads the dataset."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from ctxcompact.batch.parquet import compact_parquet

    meta = pq.ParquetFile(path).metadata
    Path("/proc/self/clear_refs").write_text("5")
    base = _hwm_kb()
    live = [0]

    def sample(done: int, total: int) -> None:  # after every batch
        live[0] = max(live[0], pa.total_allocated_bytes())

    with tempfile.TemporaryDirectory() as out:
        stats = compact_parquet(path, Path(out) / "o.parquet", batch_rows=BATCH_ROWS,
                                progress=sample)  # fmt: skip
    peak = _hwm_kb()
    print(json.dumps({"rows": meta.num_rows, "bytes": stats.bytes_read, "extra_kb": peak - base,
                      "peak_rows": stats.peak_rows, "live_arrow": live[0]}))  # fmt: skip


BATCH_ROWS = 16_384


def ingest_child(path: str, out: str, mode: str) -> None:
    """Peak resident size of ingesting ``path``: streamed by the CLI, or read whole."""
    import time

    from ctxcompact.cli import main
    from ctxcompact.formats import read_sessions

    start = time.perf_counter()
    if mode == "whole":
        rows = read_sessions(path).table.num_rows
    else:
        sys.argv = ["ctxcompact", "ingest", path, "-o", out, "--json"]
        try:
            main()
        except SystemExit as e:
            if e.code:
                raise
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(out).metadata.num_rows
    seconds = time.perf_counter() - start
    print(json.dumps({"rows": rows, "peak_kb": _hwm_kb(), "seconds": seconds}))


def write_export(path: Path, gigabytes: float) -> int:
    """An OpenCode export of about ``gigabytes``: one block of generated sessions
    repeated with the session ids renamed per copy. Returns its size."""
    from ctxcompact import formats
    from ctxcompact.batch.synthetic import generate_table
    from ctxcompact.transcript import Transcript

    block_file = path.with_name(f"block-{path.name}")
    formats.write(Transcript(generate_table(200, 500, seed=3)).to_sessions(), block_file,
                  "opencode")  # fmt: skip
    block = block_file.read_bytes()
    block_file.unlink()
    target = int(gigabytes * 1e9)
    with path.open("wb") as f:
        copy = 0
        while copy * len(block) < target:
            f.write(block.replace(b'"ses_', b'"c%06d_' % copy))
            copy += 1
    return path.stat().st_size


def write_claude_session(path: Path, gigabytes: float) -> int:
    """One Claude Code session of about ``gigabytes``: the events of generated
    sessions, all under one ``sessionId``, repeated with their uuids and call
    ids renamed per copy, and a ``file-history-snapshot`` line (no session
    id) before every tenth event. Returns the file's size."""
    import re

    from ctxcompact import formats
    from ctxcompact.batch.synthetic import generate_table
    from ctxcompact.transcript import Transcript

    block_file = path.with_name(f"block-{path.name}")
    formats.write(Transcript(generate_table(100, 500, seed=3)).to_sessions(), block_file,
                  "claude-code")  # fmt: skip
    lines = block_file.read_bytes().splitlines(keepends=True)
    block_file.unlink()
    snapshot = b'{"type":"file-history-snapshot","messageId":"m","snapshot":{}}\n'
    block = b"".join((snapshot if k % 10 == 0 else b"") + re.sub(
        rb'"sessionId": ?"[^"]*"', b'"sessionId":"one-long-session"', line)
        for k, line in enumerate(lines))  # fmt: skip
    ids = re.compile(rb'"(uuid|parentUuid|id|tool_use_id)": ?"')
    target = int(gigabytes * 1e9)
    with path.open("wb") as f:
        copy = 0
        while copy * len(block) < target:
            f.write(ids.sub(rb'"\1":"c%06d_' % copy, block))
            copy += 1
    return path.stat().st_size


def ingest_main(sizes: list[float], claude: bool = False) -> None:
    print("| JSONL file | rows | ingest (streamed, CLI) peak RSS | MB/s | read whole peak RSS |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for gb in sizes:
            path = Path(tmp) / f"export-{gb}.jsonl"
            size = (write_claude_session if claude else write_export)(path, gb)
            runs = {}
            for mode in ("stream", "whole") if gb <= 2 else ("stream",):
                out = subprocess.run(
                    [sys.executable, __file__, "--ingest-child", str(path),
                     str(Path(tmp) / "rows.parquet"), mode],
                    check=True, capture_output=True, text=True,
                ).stdout.splitlines()[-1]  # fmt: skip
                runs[mode] = json.loads(out)
            s = runs["stream"]
            whole = f"{runs['whole']['peak_kb'] / 1024:,.0f} MB" if "whole" in runs else "not run"
            print(f"| {size / 1e9:.1f} GB | {s['rows']:,} | {s['peak_kb'] / 1024:,.0f} MB "
                  f"| {size / 1e6 / s['seconds']:.0f} | {whole} |")  # fmt: skip
            path.unlink()


def child(path: str, scan: str) -> None:
    import pyarrow.parquet as pq
    from ctxcompact import scans

    table = pq.read_table(path)
    # Reset the peak (VmHWM) so the Parquet read's transient buffers don't hide the scan's.
    Path("/proc/self/clear_refs").write_text("5")
    base = _hwm_kb()
    if scan == "estimate_tokens_array":
        scans.estimate_tokens_array(table.column("output"))
    else:
        getattr(scans, scan)(table)
    peak = _hwm_kb()
    print(json.dumps({"rows": table.num_rows, "bytes": table.nbytes, "extra_kb": peak - base}))


def main() -> None:
    import pyarrow.parquet as pq
    from ctxcompact.batch.synthetic import generate_table

    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "t.parquet")
        # Row groups of 64k rows, as a platform would write them: Parquet is
        # decoded a row group at a time, so that (not the file) bounds a read.
        table = generate_table(sessions, 500, seed=7, mean_output_chars=1500)
        pq.write_table(table, path, row_group_size=65_536)
        del table
        print("| scan | rows | input MB | peak beyond input | bytes/row |")
        print("|---|---|---|---|---|")
        for scan in SCANS:
            out = subprocess.run(
                [sys.executable, __file__, "--child", path, scan],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out)
            extra = r["extra_kb"] * 1024
            print(
                f"| {scan} | {r['rows']:,} | {r['bytes'] / 1e6:.0f} | {extra / 1e6:.1f} MB "
                f"| {extra / r['rows']:.1f} |"
            )
        print("\n| compact_parquet | rows | x batch | Arrow MB streamed | live Arrow peak "
              "| process peak (RSS) | rows held at most |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for share in (8, 2, 1):  # the same data at 1/8, 1/2 and full size
            part = str(Path(tmp) / f"s{share}.parquet")
            full = pq.read_table(path)
            pq.write_table(full.slice(0, full.num_rows // share), part, row_group_size=65_536)
            del full
            out = subprocess.run([sys.executable, __file__, "--stream", part], check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
            r = json.loads(out)
            print(
                f"| batch_rows={BATCH_ROWS:,} | {r['rows']:,} | {r['rows'] / BATCH_ROWS:.0f} "
                f"| {r['bytes'] / 1e6:.0f} | {r['live_arrow'] / 1e6:.0f} MB "
                f"| {r['extra_kb'] / 1024:.0f} MB | {r['peak_rows']:,} |"
            )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "--stream":
        stream_child(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "--ingest-child":
        ingest_child(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "--ingest":
        ingest_main([float(x) for x in sys.argv[2:]] or [1, 4, 10])
    elif len(sys.argv) > 1 and sys.argv[1] == "--ingest-claude":
        ingest_main([float(x) for x in sys.argv[2:]] or [0.5, 1, 2], claude=True)
    else:
        main()
