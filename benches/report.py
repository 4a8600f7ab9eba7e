"""Turn a pytest-benchmark JSON file into the README's table.

pytest benches --benchmark-enable --benchmark-json=bench.json
python benches/report.py bench.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main(path: str) -> None:
    data = json.loads(Path(path).read_text())
    groups: dict[str, list[dict]] = defaultdict(list)
    for b in data["benchmarks"]:
        groups[b["group"]].append(b)
    print("| scan | implementation | median | parts/s | MB/s | vs reference |")
    print("|---|---|---|---|---|---|")
    for group, items in groups.items():
        base = next((b["stats"]["median"] for b in items if "reference" in b["name"]), None)
        for b in sorted(items, key=lambda b: -b["stats"]["median"]):
            median = b["stats"]["median"]
            rows, size = b["extra_info"].get("rows", 0), b["extra_info"].get("bytes", 0)
            name = b["name"].split("[")[0].removeprefix("test_")
            impl = (
                "Python reference"
                if "reference" in name
                else f"Rust, {b['params']['threads']} thread(s)"
            )
            ratio = f"{base / median:.1f}x" if base else ""
            print(
                f"| {group} | {impl} | {median * 1000:.1f} ms | {rows / median / 1e6:.2f} M "
                f"| {size / median / 1e6:.0f} | {ratio} |"
            )


if __name__ == "__main__":
    main(sys.argv[1])
