"""Every ```python block of README.md runs as written (issue 10, item 10).

Each block runs as a script in a fresh process and an empty directory. The
OpenAI SDK's standard environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)
points at a local server speaking the Chat Completions wire format, so a block
that calls a model needs no key and no network.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ctxcompact
import pytest
from ctxcompact.live import prompts
from ctxcompact.testing.servers import FakeOpenAIServer, Reply

README = Path(__file__).parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    """(the heading above it, the code) for each python block."""
    text = README.read_text(encoding="utf-8")
    out = []
    for match in BLOCK.finditer(text):
        headings = re.findall(r"^#+ (.+)$", text[: match.start()], re.M)
        out.append((headings[-1] if headings else "top", match.group(1)))
    return out


def model(body: dict[str, Any]) -> Reply:
    """A coding agent in two steps: read the file named in the task, then answer."""
    messages = body["messages"]
    if messages[0]["content"] == prompts.SYSTEM_PROMPT:  # the compaction agent
        return Reply("## Session Summary\nRead src/app.py.")
    if messages[-1]["role"] == "tool":
        return Reply("The file is missing, so there is no test to fix.", input_tokens=120)
    call = {"id": "call_1", "name": "read", "arguments": json.dumps({"path": "src/app.py"})}
    return Reply("", finish="tool_calls", tool_calls=[call], input_tokens=100)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(responder=model) as s:
        yield s


def run_block(code: str, cwd: Path, server: FakeOpenAIServer) -> subprocess.CompletedProcess[str]:
    (cwd / "snippet.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env |= {
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test-key",
        # The README must use today's import paths, never a deprecated one.
        "PYTHONWARNINGS": "error:ctxcompact.:DeprecationWarning",
        "PYTHONPATH": os.pathsep.join(
            [str(Path(ctxcompact.__file__).parents[1]), env.get("PYTHONPATH", "")]
        ),
    }
    return subprocess.run([sys.executable, "snippet.py"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_the_readme_has_its_python_blocks() -> None:
    found = [heading for heading, _ in blocks()]
    assert {"Columnar scans", "A live agent loop", "Batch: millions of stored transcripts"} <= set(
        found
    )


@pytest.mark.parametrize(("heading", "code"), blocks(), ids=[h for h, _ in blocks()])
def test_readme_block_runs_as_written(
    heading: str, code: str, tmp_path: Path, server: FakeOpenAIServer
) -> None:
    done = run_block(code, tmp_path, server)
    assert done.returncode == 0, f"README block under {heading!r} failed:\n{done.stderr}"
    if heading == "A live agent loop" and "sdk.chat.completions" in code:  # not the hooks one
        # It went through the model twice: the tool call, then the answer with its result.
        agent = [r.body for r in server.requests if r.body.get("tools")]
        assert len(agent) == 2
        assert "FileNotFoundError" in agent[1]["messages"][-1]["content"]
        assert "'compactions': 0" in done.stdout and (tmp_path / "sessions.db").exists()
