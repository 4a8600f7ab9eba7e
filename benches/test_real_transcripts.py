"""The real-transcript report (``python benches/real_transcripts.py``) runs, never
grows a prompt, and the presets that reach single-task runs do save there."""

from __future__ import annotations

import pytest
from real_transcripts import DATA, POLICIES, measure, tables_by_corpus


@pytest.mark.skipif(not DATA.exists(), reason="../shared/data is not beside this checkout")
def test_every_corpus_is_measured_and_no_policy_adds_tokens() -> None:
    corpora = tables_by_corpus()
    assert {"swe-agent", "tau-bench", "openhands", "mini-swe-agent"} <= set(corpora)
    for corpus, table in corpora.items():
        rows = measure(table)
        for row in rows:
            for name in POLICIES:
                assert row[f"{name}_after"] <= row["tokens"], (corpus, name)
                assert row[f"{name}_calls_after"] <= row["calls_tokens"], (corpus, name)
        if corpus in ("swe-agent", "mini-swe-agent", "tau-bench"):
            # OpenCode's user turns protect a single-task run; SWE-agent's masking does not
            saved = sum(r["calls_tokens"] - r["swe-agent_calls_after"] for r in rows)
            assert sum(r["calls_tokens"] - r["opencode_calls_after"] for r in rows) == 0
            assert saved > 0.05 * sum(r["calls_tokens"] for r in rows), corpus
