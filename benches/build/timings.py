"""Sum cargo's --timings per crate group: `python timings.py BEFORE.html [AFTER.html]`.

Reads the UNIT_DATA of each cargo-timing.html (benches/build/cold.sh writes one)
and prints a markdown table of unit seconds per group, then the slowest units.
Unit seconds are each rustc's wall time as cargo measured it, so they scale
with the machine's load; compare runs made under the same load.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

GONE = "crates the last run no longer builds"
GROUPS = {
    "arrow (array, buffer, data, schema, select)": (
        "arrow-array arrow-buffer arrow-data arrow-schema arrow-select"
    ),
    "pyo3": "pyo3 pyo3-ffi pyo3-macros pyo3-macros-backend pyo3-build-config target-lexicon heck",
    "proc macros (syn, serde_derive, thiserror)": (
        "proc-macro2 quote syn unicode-ident serde_derive thiserror-impl"
    ),
    "ctxcompact": "ctxcompact",
}


def group_of(name: str, gone: set[str]) -> str:
    if name in gone:
        return GONE
    for group, names in GROUPS.items():
        if name in names.split():
            return group
    return "the rest (serde_json, bpe, regex, rayon, flate2, ...)"


def units(path: str) -> list[dict]:
    html = Path(path).read_text()
    match = re.search(r"UNIT_DATA\s*=\s*(\[.*?\]);\s*$", html, re.S | re.M)
    if match is None:
        sys.exit(f"{path}: no UNIT_DATA (not a cargo --timings report?)")
    data: list[dict] = json.loads(match.group(1))
    return data


def main() -> None:
    runs = [units(p) for p in sys.argv[1:]]
    gone = {u["name"] for u in runs[0]} - {u["name"] for u in runs[-1]}
    sums: list[dict[str, float]] = []
    for run in runs:
        total: dict[str, float] = defaultdict(float)
        for u in run:
            total[group_of(u["name"], gone)] += u["duration"]
        sums.append(total)
    groups = [GONE, *GROUPS, "the rest (serde_json, bpe, regex, rayon, flate2, ...)"]
    print("| crate group | " + " | ".join(f"units, run {i + 1}" for i in range(len(runs))) + " |")
    print("|---|" + "---|" * len(runs))
    for g in groups:
        cells = [f"{s.get(g, 0):.0f} s ({len([u for u in r if group_of(u['name'], gone) == g])})"
                 for s, r in zip(sums, runs)]  # fmt: skip
        print(f"| {g} | " + " | ".join(cells) + " |")
    print("| all units | " + " | ".join(f"{sum(s.values()):.0f} s ({len(r)})"
                                       for s, r in zip(sums, runs)) + " |")  # fmt: skip
    print(f"\n{GONE}: {' '.join(sorted(gone))}")
    for i, run in enumerate(runs):
        print(f"\nrun {i + 1}: slowest units")
        for u in sorted(run, key=lambda u: -u["duration"])[:15]:
            print(f"  {u['duration']:7.1f} s  {u['name']} {u['version']} {u.get('target', '')}")


if __name__ == "__main__":
    main()
