"""The README and docs/*.md say what the code does, and their code runs.

Every ```python block of README.md and docs/*.md runs as a script in a fresh
process and an empty directory. The OpenAI SDK's standard environment
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``) points at a local server speaking
the Chat Completions wire format, so a block that calls a model needs no key
and no network.

Two marks, on the line above a block's opening fence (docs/building.md,
Documentation tests):

- ``<!-- test-setup: NAME -->``: the block reads files that ``SETUPS[NAME]``
  writes into its directory first;
- ``<!-- test: skip REASON -->``: the block cannot run as a script.

Every relative link (file, and ``#anchor`` as GitHub makes them from the
headings) must resolve. The README's stored-runs quick start runs as written
on the public SWE-agent runs, and its install and test commands are the ones
.ci/run runs.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ctxcompact
import pyarrow.parquet as pq
import pytest
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.live import prompts
from support.servers import FakeOpenAIServer, Reply

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
DATA = ROOT.parent / "shared" / "data" / "transcripts"
FENCE = re.compile(r"^(`{3,})(\S*)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!--\s*test(-setup)?:\s*(.*?)\s*-->\s*\Z")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")

LIVE_QUICK_START = "Quick start: a live agent loop with your own model"
RUNS_QUICK_START = "Quick start: your stored runs"
BATCH_QUICK_START = "Quick start: batch over Parquet"


def _sessions_parquet(cwd: Path) -> None:
    """A Parquet dataset of part rows: 50 generated coding-agent sessions."""
    (cwd / "sessions").mkdir()
    pq.write_table(generate_table(50, 1000, seed=1), cwd / "sessions" / "day1.parquet")


SETUPS: dict[str, Callable[[Path], None]] = {"sessions-parquet": _sessions_parquet}


@dataclass(frozen=True)
class Block:
    page: Path
    heading: str
    lang: str
    code: str
    mark: str  # "", "setup NAME" or "skip REASON"

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.heading}"


def _without_fences(text: str) -> str:
    """The text with every fenced block blanked (same length; a heading keeps its code)."""
    return FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _outside_code(text: str) -> str:
    """The text with every fenced block and inline code span blanked (same length)."""
    return re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)), _without_fences(text))


def fenced(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    prose = _without_fences(text)
    out = []
    for match in FENCE.finditer(text):
        headings = re.findall(r"^#+ (.+)$", prose[: match.start()], re.M)
        mark = MARK.search(text[: match.start()])
        kind = "" if mark is None else ("setup " if mark.group(1) else "") + mark.group(2)
        heading = headings[-1].strip() if headings else "top"
        out.append(Block(page, heading, match.group(2), match.group(3), kind))
    return out


def readme_code(heading: str, lang: str) -> list[str]:
    return [b.code for b in fenced(README) if b.heading == heading and b.lang == lang]


def python_blocks() -> list[Block]:
    return [b for page in PAGES for b in fenced(page) if b.lang == "python"]


def _ids(blocks: list[Block]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for b in blocks:
        seen[b.id] = seen.get(b.id, 0) + 1
        out.append(b.id if seen[b.id] == 1 else f"{b.id} #{seen[b.id]}")
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


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(ctxcompact.__file__).parents[1]), env.get("PYTHONPATH", "")]
    )
    return env


def run_block(
    code: str, cwd: Path, server: FakeOpenAIServer, database_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    (cwd / "snippet.py").write_text(code, encoding="utf-8")
    env = _env() | {
        "OPENAI_BASE_URL": server.base_url,
        # A block on PostgreSQL reads its server from here, like a program would.
        **({"DATABASE_URL": database_url} if database_url else {}),
        "OPENAI_API_KEY": "test-key",
        # The docs must use today's import paths, never a deprecated one.
        "PYTHONWARNINGS": "error:ctxcompact.:DeprecationWarning",
    }
    return subprocess.run([sys.executable, "snippet.py"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_the_readme_is_a_short_page_with_three_quick_starts() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    headings = re.findall(r"^## (.+)$", _outside_code(text), re.M)
    assert {LIVE_QUICK_START, RUNS_QUICK_START, BATCH_QUICK_START} <= set(headings)
    (live,) = readme_code(LIVE_QUICK_START, "python")
    assert "ctxcompact.testing" not in live  # a newcomer's loop needs no test fixture


def test_marks_are_known_and_rare() -> None:
    blocks = python_blocks()
    marks = [b.mark for b in blocks if b.mark]
    for mark in marks:
        kind, _, arg = mark.partition(" ")
        assert kind in {"setup", "skip"} and arg, f"unknown mark {mark!r}"
        if kind == "setup":
            assert arg in SETUPS, f"no setup {arg!r} in tests/test_readme.py SETUPS"
    assert len(marks) <= len(blocks) // 5


@pytest.mark.parametrize("block", python_blocks(), ids=_ids(python_blocks()))
def test_python_block_runs_as_written(
    block: Block, tmp_path: Path, server: FakeOpenAIServer, request: pytest.FixtureRequest
) -> None:
    kind, _, arg = block.mark.partition(" ")
    if kind == "skip":
        pytest.skip(f"marked in {block.page.name}: {arg}")
    if kind == "setup":
        SETUPS[arg](tmp_path)
    database_url = None
    if "DATABASE_URL" in block.code:  # the tests' throwaway cluster (tests/support)
        database_url = request.getfixturevalue("postgres").conninfo
    done = run_block(block.code, tmp_path, server, database_url)
    assert done.returncode == 0, f"{block.id} failed:\n{done.stderr}"
    if "sdk.chat.completions" in block.code:  # the live loop, through the real SDK
        # It went through the model twice: the tool call, then the answer with its result.
        agent = [r.body for r in server.requests if r.body.get("tools")]
        assert len(agent) == 2
        assert "FileNotFoundError" in agent[1]["messages"][-1]["content"]
        assert "'compactions': 0" in done.stdout and (tmp_path / "sessions.db").exists()


def _imported(code: str) -> set[str]:
    """The top-level modules a piece of Python code imports."""
    out = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            out |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.partition(".")[0])
    return out


#: The test suite's own modules (tests/*.py, tests/support): not installed with the package.
TEST_MODULES = {p.stem for p in (ROOT / "tests").glob("*.py")} | {"support", "conftest"}


@pytest.mark.parametrize(
    "source",
    [*(b.code for b in python_blocks()), *(p.read_text("utf-8") for p in EXAMPLES)],
    ids=[*_ids(python_blocks()), *(p.name for p in EXAMPLES)],
)
def test_docs_and_examples_import_no_test_fixture(source: str) -> None:
    assert not _imported(source) & TEST_MODULES
    assert "ctxcompact.testing" not in source  # the old home of the fixtures


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    out: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#+ (.+)$", _without_fences(page.read_text("utf-8")), re.M):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def links() -> list[tuple[Path, str]]:
    out = []
    for page in PAGES:
        for target in LINK.findall(_outside_code(page.read_text(encoding="utf-8"))):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, mailto: ...
                out.append((page, target))
    return out


@pytest.mark.parametrize(("page", "target"), links(), ids=[f"{p.name}->{t}" for p, t in links()])
def test_relative_link_resolves(page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{page.relative_to(ROOT)}: {target}: no such file"
    assert ROOT in dest.parents or dest == ROOT, f"{page.name}: {target} leaves the repository"
    if anchor:
        assert dest.suffix == ".md", f"{page.name}: {target}: an anchor into a non-page"
        assert anchor in _anchors(dest), f"{page.relative_to(ROOT)}: {target}: no such heading"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for page, t in links() if page == README}
    # estimator-experiments.md is reached from estimators.md
    pages = {p.resolve() for p in PAGES[1:] if p.name != "estimator-experiments.md"}
    assert pages <= linked, sorted(p.name for p in pages - linked)


def test_ci_runs_the_readme_install_and_test_commands() -> None:
    demo, tests = (code.strip() for code in readme_code("Install", "bash"))
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # a step may be wrapped in .ci/run's `timed "NAME"` and `quiet`: the command is what follows
    wrapper = re.compile(r'^(timed "[^"]*" )?(quiet )?')
    unwrapped = (wrapper.sub("", line.strip()) for line in ci.splitlines())
    lines = {re.sub(r" -q\b", "", line) for line in unwrapped}
    assert demo.endswith("&& pip install . && ctxcompact demo")
    assert any(line.startswith("ctxcompact demo") for line in lines)
    assert tests.endswith('&& pip install -e ".[dev]" && pytest')
    assert {'pip install -e ".[dev]"', "pytest"} <= lines
    # What the test command leaves out (pyproject: -m 'not slow and not fuzz') CI runs
    # too, and the README says how.
    assert "-m 'not slow and not fuzz'" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert any(line.split(" --durations")[0] == "pytest -m slow" for line in lines)
    assert any(line.startswith("tools/fuzz/run.sh 0 ") for line in lines)
    assert "`pytest -m slow`" in README.read_text(encoding="utf-8")


def _commands(code: str) -> list[list[str]]:
    return [shlex.split(c) for c in code.replace("\\\n", " ").splitlines() if c.strip()]


@pytest.mark.skipif(not DATA.is_dir(), reason="needs ../shared/data")
def test_the_stored_runs_quick_start_runs_on_real_runs(tmp_path: Path) -> None:
    (grid,) = readme_code(RUNS_QUICK_START, "toml")
    (tmp_path / "grid.toml").write_text(grid, encoding="utf-8")
    (code,) = readme_code(RUNS_QUICK_START, "bash")
    commands = _commands(code)
    assert [c[:2] for c in commands] == [["ctxcompact", n] for n in
                                         ("ingest", "estimate", "replay", "tune")]  # fmt: skip
    runs = str(DATA / "swe-agent")
    for command in commands:
        argv = [runs if a == "runs/" else a for a in command[1:]]
        done = subprocess.run([sys.executable, "-m", "ctxcompact.cli", *argv], cwd=tmp_path,
                              env=_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, f"{shlex.join(command)}:\n{done.stderr}"
        if command[1] == "ingest":
            assert pq.read_metadata(tmp_path / "runs.parquet").num_rows > 0
        if command[1] in ("replay", "tune"):
            assert "claude-sonnet-4" in done.stdout
    assert (tmp_path / "report.html").stat().st_size > 0


def test_the_batch_quick_start_command_runs(tmp_path: Path) -> None:
    (code,) = readme_code(BATCH_QUICK_START, "bash")
    _sessions_parquet(tmp_path)
    for command in _commands(code):
        assert command[0] == "ctxcompact"
        done = subprocess.run([sys.executable, "-m", "ctxcompact.cli", *command[1:]], cwd=tmp_path,
                              env=_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, f"{shlex.join(command)}:\n{done.stderr}"
    assert pq.read_metadata(tmp_path / "report.parquet").num_rows == 50
