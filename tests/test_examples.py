"""Every example in examples/ runs as a user would run it, and says what it shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.servers import FakeOpenAIServer, Reply

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


def run_example(name: str, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The example as a user runs it: its own process, nothing from tests/ on its path."""
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=cwd,
                          env=os.environ | env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = {}
    if name == "postgres_store.py":  # the user's server; here the tests' throwaway cluster
        env["DATABASE_URL"] = request.getfixturevalue("postgres").conninfo
    done = run_example(name, tmp_path, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert EXPECTED[name] in done.stdout.lower()


def test_the_postgres_example_asks_for_a_server(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run([sys.executable, str(EXAMPLES / "postgres_store.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("usage: python examples/postgres_store.py URL")


def _overflowing(body: dict[str, Any]) -> Reply:
    """A model that answers at length (~3k tokens) and reports a prompt past either
    example's window: both compact."""
    return Reply("Done. " + "notes " * 2_000, input_tokens=15_500)


@pytest.mark.parametrize("name", ["agent_loop.py", "openai_agents_session.py"])
def test_an_openai_example_runs_against_a_server_given_by_base_url(
    name: str, tmp_path: Path
) -> None:
    with FakeOpenAIServer(responder=_overflowing) as server:
        done = run_example(name, tmp_path, "--base-url", server.base_url, "--model", "m-1",
                           OPENAI_API_KEY="key-1")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert server.requests, "nothing reached the server"
    assert {r.body["model"] for r in server.requests} == {"m-1"}
    keys = {
        v for r in server.requests for k, v in r.headers.items() if k.lower() == "authorization"
    }
    assert keys == {"Bearer key-1"}
