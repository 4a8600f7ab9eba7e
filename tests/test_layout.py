"""The package's face: a curated top level, one public path per name (the
unreleased 0.1 layout's import paths are gone, not aliased)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import ctxcompact as cc
import pytest
from support.rust_source import Crate, functions


def test_the_top_level_is_curated_and_imports_without_warnings() -> None:
    assert 20 <= len(cc.__all__) <= 30
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in cc.__all__:
            getattr(cc, name)


#: Import paths of the unreleased 0.1 layout, served by a shim until it was
#: removed: none of them may come back.
OLD_MODULES = [
    "ctxcompact.atomic", "ctxcompact.chat", "ctxcompact.columnar", "ctxcompact.estimate",
    "ctxcompact.events", "ctxcompact.history", "ctxcompact.ingest", "ctxcompact.lifecycle",
    "ctxcompact.loop", "ctxcompact.overflow", "ctxcompact.parquet", "ctxcompact.prompts",
    "ctxcompact.ray_data", "ctxcompact.reference", "ctxcompact.repair", "ctxcompact.replies",
    "ctxcompact.split", "ctxcompact.store", "ctxcompact.summary", "ctxcompact.synthetic",
    # test fixtures (wire servers, PostgreSQL launcher) moved to tests/support; the
    # generator and the reference to ctxcompact.batch.synthetic and .scans.reference
    "ctxcompact.testing",
]  # fmt: skip
OLD_NAMES = ["SummaryError", "TokenBudget", "EventBus", "SessionInfo", "SummaryRequest",
             "read_jsonl", "BatchReport"]  # fmt: skip


@pytest.mark.parametrize("old", OLD_MODULES)
def test_an_old_module_path_does_not_import(old: str) -> None:
    # A fresh interpreter: nothing imported earlier in this process can mask it.
    code = (
        "import importlib\n"
        "try:\n"
        f"    importlib.import_module({old!r})\n"
        "except ModuleNotFoundError as e:\n"
        "    print('gone', e.name)\n"
        "else:\n"
        "    print('IMPORTED')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["gone", old]


@pytest.mark.parametrize("name", OLD_NAMES)
def test_an_old_top_level_name_is_a_plain_attribute_error(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=rf"has no attribute '{name}'"):
            getattr(cc, name)
    assert not hasattr(cc, "__getattr__")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        cc.not_a_name  # noqa: B018


def test_every_subpackage_face_lists_only_what_it_exports() -> None:
    for pkg in ("scans", "live", "batch", "formats", "clients", "errors", "transcript"):
        module = importlib.import_module(f"ctxcompact.{pkg}")
        exported = getattr(module, "__all__", None)
        if exported is None:
            continue
        missing = [n for n in exported if not hasattr(module, n)]
        assert not missing, (pkg, missing)


def import_graph(root: Path) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over the package under ``root``, read
    from every ``import`` / ``from`` statement (module level and inside
    functions; not under ``if TYPE_CHECKING:``, which never runs). ``from pkg
    import name`` imports ``pkg``'s ``__init__.py`` unless ``name`` is a
    submodule; relative imports resolve against the importing module."""

    def name_of(path: Path) -> str:
        parts = list(path.relative_to(root).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    files = {name_of(p): p for p in root.glob("ctxcompact/**/*.py")}
    known = set(files) | {name_of(p.with_name(p.name.split(".")[0] + ".py"))
                          for p in root.glob("ctxcompact/**/*.so")}  # fmt: skip
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        unrun = {id(n) for s in ast.walk(tree) if isinstance(s, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(s.test)
                 for b in s.body for n in ast.walk(b)}  # fmt: skip
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        graph[module] = targets = set()
        for node in ast.walk(tree):
            if id(node) in unrun:
                continue
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name in known}
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                parts = (base, node.module) if node.level else (node.module,)
                source = ".".join(p for p in parts if p)
                if source in known:
                    subs = {f"{source}.{a.name}" for a in node.names}
                    targets |= {s if s in known else source for s in subs}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected components of more than one module
    (Tarjan's algorithm), plus any module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while (w := stack.pop()) != v:
                component.add(w)
            component.add(v)
            if len(component) > 1 or v in graph.get(v, ()):
                circles.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


#: Circles left to break, each with why it is still here. The test fails on
#: any other circle, and on one of these once it is gone (delete it here then).
#: Empty since issue 41, part 8 moved the formats package's code out of its
#: ``__init__.py`` (``formats.detect``, ``.documents``, ``.writer``) and the
#: names a folder read takes into ``_sources``.
KNOWN_CIRCLES: list[set[str]] = []


def test_the_package_has_no_import_circles() -> None:
    # A package's __init__.py importing its modules is downward; a module
    # importing its own package's face, which imports it back, is a circle.
    root = Path(cc.__file__).parent.parent
    circles = import_circles(import_graph(root))
    assert sorted(map(sorted, circles)) == sorted(map(sorted, KNOWN_CIRCLES))


def test_the_import_graph_sees_function_level_and_package_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "ctxcompact"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from ctxcompact.a import f\n")
    (pkg / "a.py").write_text("def f():\n    from ctxcompact import b\n")
    (pkg / "b.py").write_text("from . import a\nfrom ctxcompact import f\n")
    (pkg / "sub" / "__init__.py").write_text("from .c import g\n")
    (pkg / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ctxcompact.sub import g\n"
        "import ctxcompact.a as a\n"
    )
    graph = import_graph(tmp_path)
    assert graph["ctxcompact.a"] == {"ctxcompact.b"}
    assert graph["ctxcompact.b"] == {"ctxcompact.a", "ctxcompact"}
    assert graph["ctxcompact.sub"] == {"ctxcompact.sub.c"}
    assert graph["ctxcompact.sub.c"] == {"ctxcompact.a"}
    assert sorted(map(sorted, import_circles(graph))) == [
        ["ctxcompact", "ctxcompact.a", "ctxcompact.b"]
    ]


#: The most lines a module under python/ctxcompact may hold (issue 41, part 8).
MOST_LINES = 800


def test_no_module_is_over_800_lines() -> None:
    package = Path(cc.__file__).parent
    sizes = {str(p.relative_to(package)): len(p.read_text(encoding="utf-8").splitlines())
             for p in package.rglob("*.py")}  # fmt: skip
    assert sizes  # the package was found
    over = {name: n for name, n in sizes.items() if n > MOST_LINES}
    assert not over, f"split by meaning: {over}"


# The Rust core (rust/src): its rooms are its files, a module's mod.rs one
# room and each child another. A room names another by a path (a `use` line
# or a path in code) that leads to it: `super::Problem` in ingest/chat.rs
# names ingest/mod.rs, `super::types::Problem` names ingest/types.rs.
# `#[cfg(test)]` items are left out (tests.rs-like modules may read both
# sides of what they compare).
RUST_SRC = Path(__file__).resolve().parents[1] / "rust" / "src"


def test_the_rust_core_has_no_import_circles() -> None:
    graph = Crate(RUST_SRC / "lib.rs").rooms()
    assert "ingest/claude_file.rs" in graph["ingest/claude_code.rs"]  # the reader sees the core
    assert import_circles(graph) == []


#: Functions of the Rust core over 150 lines, each with why it is still here.
#: The test fails on any other, and on one of these once it is shorter
#: (delete it here then).
KNOWN_LONG: set[tuple[str, str]] = set()


def test_no_rust_function_is_over_150_lines() -> None:
    long = {(file, name): n for file, name, n in functions(RUST_SRC) if n > 150}
    assert set(long) == KNOWN_LONG, long


def test_the_rust_room_graph_reads_paths_not_comments_strings_or_tests(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "ingest").mkdir(parents=True)
    (src / "lib.rs").write_text("pub mod error;\npub mod ingest;\n#[cfg(test)]\nmod testutil;\n")
    (src / "error.rs").write_text(
        "// crate::ingest::chat in a comment\n"
        'pub const S: &str = "super::ingest::chat";\n'
        "pub fn lifetime<'a>(c: &'a str) -> char { '\"' }\n"
    )
    (src / "testutil.rs").write_text("use crate::ingest::chat;\n")
    (src / "ingest" / "mod.rs").write_text(
        "mod chat;\nmod lines;\npub mod types;\nuse lines::*;\n"
        "pub use types::Problem;\n"
        "pub fn go() { chat::read() }\n"
    )
    (src / "ingest" / "types.rs").write_text(
        "pub struct Problem;\n#[cfg(test)]\nmod tests {\n    use super::super::chat;\n}\n"
    )
    (src / "ingest" / "chat.rs").write_text(
        "use super::types::Problem;\nuse crate::{error::{self, S as T}};\npub fn read() {}\n"
    )
    (src / "ingest" / "lines.rs").write_text(
        "use super::*;\n/* nested /* crate::error */ */\npub fn f() { chat::read() }\n"
    )
    graph = Crate(src / "lib.rs").rooms()
    assert graph == {
        "lib.rs": set(),
        "error.rs": set(),
        "ingest/mod.rs": {"ingest/chat.rs", "ingest/lines.rs", "ingest/types.rs"},
        "ingest/types.rs": set(),
        "ingest/chat.rs": {"ingest/types.rs", "error.rs"},
        # a glob import of the parent names the parent, and its children
        "ingest/lines.rs": {"ingest/mod.rs", "ingest/chat.rs"},
    }
    assert import_circles(graph) == [{"ingest/mod.rs", "ingest/lines.rs"}]
    (src / "ingest" / "chat.rs").write_text("use super::Problem;\n")
    (src / "ingest" / "lines.rs").write_text("pub fn f() {}\n")
    # `super::Problem` is the parent's face, which reads chat back
    assert import_circles(Crate(src / "lib.rs").rooms()) == [{"ingest/mod.rs", "ingest/chat.rs"}]


def test_a_rust_function_counts_its_lines_as_written(tmp_path: Path) -> None:
    (tmp_path / "a.rs").write_text(
        "trait T {\n    fn declared(&self);\n}\n"
        "pub(crate) fn three(x: u8)\n    -> u8 {\n    x }\n"
        "fn braces() {\n    let s = \"}}}\";\n    // }\n    let c = '}';\n}\n"
    )
    assert functions(tmp_path) == [("a.rs", "three", 3), ("a.rs", "braces", 5)]
