"""Every example in examples/ runs as a user would run it, and says what it shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"
#: A line each example prints when it worked (they assert their own results too).
EXPECTED = {
    "agent_loop.py": "compaction",
    "langchain_agent.py": "compactions: 2",
    "pydantic_ai_agent.py": "compactions: 2",
    "openai_agents_session.py": "none lost",
    "postgres_store.py": "records: 1, conflicts: 1",
}


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str, tmp_path: Path) -> None:
    if name == "postgres_store.py":
        from ctxcompact.testing.postgres import PostgresUnavailable, find_bindir

        try:
            find_bindir()
        except PostgresUnavailable as e:
            if os.environ.get("CI"):
                raise
            pytest.skip(str(e))
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert EXPECTED[name] in done.stdout.lower()
