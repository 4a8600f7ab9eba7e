"""The real-transcript report (``python benches/real_transcripts.py``) runs and never grows."""

from __future__ import annotations

import pytest
from real_transcripts import DATA, measure, tables_by_corpus


@pytest.mark.skipif(not DATA.exists(), reason="../shared/data is not beside this checkout")
def test_every_corpus_is_measured_and_compaction_never_adds_tokens() -> None:
    corpora = tables_by_corpus()
    assert {"swe-agent", "tau-bench", "openhands", "mini-swe-agent"} <= set(corpora)
    for table in corpora.values():
        for row in measure(table):
            assert row["tight_after"] <= row["opencode_after"] <= row["tokens"]
