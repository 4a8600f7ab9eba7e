"""The native work the build-profile comparison counts: `python work.py N` runs
estimate, prune, pivot, per-message estimates and a JSONL ingest N times on one
thread. Run under callgrind with N=0 and N=3: the difference is the scans' cost."""

import json
import sys
import tempfile
from pathlib import Path

import ctxcompact as cc
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.formats.reader import read_jsonl
from ctxcompact.scans import estimate_tokens_array

reps = int(sys.argv[1])
table = generate_table(40, 300, seed=3)
fixture = Path(__file__).parents[2] / "tests" / "fixtures" / "opencode_session.json"
session = json.loads(fixture.read_text())
lines = []
for i in range(200):
    session["info"]["id"] = f"s{i}"
    for m in session["messages"]:
        m["info"]["sessionID"] = f"s{i}"
    lines.append(json.dumps(session))
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "sessions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    for _ in range(reps):
        estimate_tokens_array(table["output"], threads=1)
        cc.prune(table, threads=1)
        cc.filter_pivot(table, threads=1)
        cc.estimate_messages(table, threads=1)
        read_jsonl(path, threads=1)
