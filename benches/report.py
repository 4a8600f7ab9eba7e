"""Turn a pytest-benchmark JSON file into the tables of docs/benchmarks.md.

pytest benches --benchmark-enable --benchmark-json=bench.json
python benches/report.py bench.json

In each group the baseline is the test whose name says ``reference``, ``separate_scans``,
``floor`` or ``langchain``; the last column is baseline time / this time.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

BASELINES = ("reference", "floor", "langchain", "separate_scans")


def label(b: dict[str, Any]) -> str:
    name = b["name"].split("[")[0].removeprefix("test_")
    threads = (b.get("params") or {}).get("threads")
    if "reference" in name:
        return "Python reference"
    if threads is not None:
        return f"Rust, {threads} thread(s)"
    return name.replace("_", " ")


def main(path: str) -> None:
    data = json.loads(Path(path).read_text())
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for b in data["benchmarks"]:
        groups[b["group"]].append(b)
    print("| group | implementation | median | rows/s | MB/s | vs baseline |")
    print("|---|---|---|---|---|---|")
    for group, items in groups.items():
        base = next(
            (b["stats"]["median"] for b in items if any(w in b["name"] for w in BASELINES)), None
        )
        for b in sorted(items, key=lambda b: -b["stats"]["median"]):
            median = b["stats"]["median"]
            rows, size = b["extra_info"].get("rows", 0), b["extra_info"].get("bytes", 0)
            ratio = f"{base / median:.2f}x" if base else ""
            mbs = f"{size / median / 1e6:.0f}" if size else ""
            print(
                f"| {group} | {label(b)} | {median * 1000:.1f} ms | {rows / median / 1e6:.2f} M "
                f"| {mbs} | {ratio} |"
            )


if __name__ == "__main__":
    main(sys.argv[1])
