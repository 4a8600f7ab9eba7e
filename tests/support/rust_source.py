"""What tests/test_layout.py reads of the Rust core's source (rust/src): its
rooms (one per file) with the rooms each one's paths name, and the length of
every ``fn`` as written.

A reader of Rust's surface, not a compiler: comments and string and char
literals are blanked first, so a path or brace inside them counts for
nothing; an item under ``#[cfg(test)]`` (a ``mod tests``, a test helper) is
left out, as tests are not the core's rooms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def blank(text: str) -> str:
    """``text`` with comments and string and char literals replaced by spaces
    (line breaks kept, so offsets and line numbers stay)."""
    out = list(text)
    i, n = 0, len(text)

    def wipe(start: int, end: int) -> None:
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            wipe(i, end)
            i = end
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif (m := re.compile(r"b?r(#*)\"").match(text, i)) and not _ident_before(text, i):
            close = '"' + m.group(1)
            end = text.find(close, m.end())
            end = n if end < 0 else end + len(close)
            wipe(i, end)
            i = end
        elif c == '"' or (c == "b" and text.startswith('b"', i) and not _ident_before(text, i)):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        elif c == "'" or (c == "b" and text.startswith("b'", i) and not _ident_before(text, i)):
            # a char literal ('a', '\n', '\u{b}', b'x'), else a lifetime ('a)
            j = i + (2 if c == "b" else 1)
            m = re.compile(r"\\(u\{[0-9a-fA-F]*\}|x..|.)'|[^\\']'", re.S).match(text, j)
            if m:
                wipe(i, m.end())
                i = m.end()
            else:
                i = j
        elif re.match(r"[A-Za-z0-9_]", c):
            m = re.compile(r"[A-Za-z0-9_]+").match(text, i)
            assert m
            i = m.end()
        else:
            i += 1
    return "".join(out)


def _ident_before(text: str, i: int) -> bool:
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


def block_end(text: str, open_brace: int) -> int:
    """The offset just past the ``}`` closing the ``{`` at ``open_brace``
    (in blanked text)."""
    depth = 0
    for k in range(open_brace, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k + 1
    raise ValueError("unbalanced braces")


def item_end(text: str, start: int) -> int:
    """The end of the item starting at ``start``: past its first ``;`` at
    brace depth 0, or past the block its first ``{`` opens."""
    for k in range(start, len(text)):
        if text[k] == ";":
            return k + 1
        if text[k] == "{":
            return block_end(text, k)
    return len(text)


_CFG_TEST = re.compile(r"#\[cfg\(test\)\]")


def without_tests(text: str) -> str:
    """Blanked ``text`` with every ``#[cfg(test)]`` item blanked too."""
    out = list(text)
    for m in _CFG_TEST.finditer(text):
        for k in range(m.start(), item_end(text, m.end())):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


@dataclass
class Module:
    """A module: a file's own, or one written inline (``mod x { ... }``)."""

    path: tuple[str, ...]  # () is the crate root
    file: Path
    span: tuple[int, int]  # where its body is in the file's blanked text
    children: dict[str, tuple[str, ...]] = field(default_factory=dict)
    uses: list[tuple[list[str], str | None]] = field(default_factory=list)  # (path, alias)


_MOD = re.compile(rf"\b(?:pub(?:\([a-z]+\))?\s+)?mod\s+({_IDENT})\s*([;{{])")
_USE = re.compile(r"\b(?:pub(?:\([a-z]+\))?\s+)?use\s+([^;]*);")


class Crate:
    """The module tree of the crate rooted at ``root`` (lib.rs), without its
    ``#[cfg(test)]`` items."""

    def __init__(self, root: Path) -> None:
        self.src = root.parent
        self.modules: dict[tuple[str, ...], Module] = {}
        self.texts: dict[Path, str] = {}
        self._read_file((), root, root.parent)

    def _read_file(self, path: tuple[str, ...], file: Path, folder: Path) -> None:
        text = without_tests(blank(file.read_text(encoding="utf-8")))
        self.texts[file] = text
        self._read_body(path, file, folder, text, 0, len(text))

    def _read_body(
        self, path: tuple[str, ...], file: Path, folder: Path, text: str, start: int, end: int
    ) -> None:
        module = self.modules[path] = Module(path, file, (start, end))
        at = start
        while (m := _MOD.search(text, at, end)) is not None:
            name, child = m.group(1), (*path, m.group(1))
            module.children[name] = child
            if m.group(2) == ";":
                here = folder / f"{name}.rs"
                file_of = here if here.exists() else folder / name / "mod.rs"
                self._read_file(child, file_of, folder / name)
                at = m.end()
            else:
                close = block_end(text, m.end() - 1)
                self._read_body(child, file, folder / name, text, m.end(), close - 1)
                at = close
        for m in _USE.finditer(self.own_text(module)):
            module.uses.extend(_use_tree(m.group(1)))

    def own_text(self, module: Module) -> str:
        """The module's body without the inline modules it holds."""
        text = self.texts[module.file]
        body = list(text[module.span[0] : module.span[1]])
        for child in module.children.values():
            inner = self.modules[child]
            if inner.file == module.file:
                for k in range(inner.span[0] - module.span[0], inner.span[1] - module.span[0]):
                    body[k] = " "
        return "".join(body)

    def names(self, module: Module) -> dict[str, tuple[str, ...]]:
        """The names of modules in scope in ``module``: its children, the
        modules its ``use`` lines name, and the children of each module it
        glob-imports."""
        scope = dict(module.children)
        for path, alias in module.uses:
            if path[-1] == "*":
                target = self.resolve(module, path[:-1], scope, exact=True)
                if target is not None:
                    scope = {**self.modules[target].children, **scope}
                continue
            if path[-1] == "self":
                path = path[:-1]
            target = self.resolve(module, path, scope, exact=True)
            if target is not None:
                scope[alias or path[-1]] = target
        return scope

    def resolve(
        self,
        module: Module,
        segments: list[str],
        scope: dict[str, tuple[str, ...]] | None = None,
        exact: bool = False,
    ) -> tuple[str, ...] | None:
        """The module a path's segments lead to (its deepest module), or
        ``None`` if it starts outside the crate. With ``exact``, only a path
        that names a module itself (``None`` for an item in one)."""
        here = module.path
        first, rest = segments[0], segments[1:]
        if first == "crate":
            at: tuple[str, ...] = ()
        elif first in ("self", "super"):
            at = here
            while segments and segments[0] in ("self", "super"):
                if segments[0] == "super":
                    at = at[:-1]
                segments = segments[1:]
            rest = segments
        elif scope is not None and first in scope:
            at = scope[first]
        elif first in module.children:
            at = module.children[first]
        else:
            return None
        for segment in rest:
            child = self.modules[at].children.get(segment)
            if child is None:
                return None if exact and segment not in ("*", "self") else at
            at = child
        return at

    def room(self, path: tuple[str, ...]) -> str:
        """A module's room: its file, relative to rust/src."""
        return self.modules[path].file.relative_to(self.src).as_posix()

    def rooms(self) -> dict[str, set[str]]:
        """``{room: rooms its paths name}``: every path in a ``use`` line or
        in code that starts at ``crate``, ``super``, ``self`` or a module in
        scope, counted for the module it leads to (``super::Problem`` in
        ``ingest/chat.rs`` names ``ingest/mod.rs``, wherever ``Problem``
        itself was defined)."""
        graph: dict[str, set[str]] = {}
        path_re = re.compile(rf"(?<![A-Za-z0-9_:])({_IDENT}(?:::{_IDENT})+)")
        for module in self.modules.values():
            room = self.room(module.path)
            targets = graph.setdefault(room, set())
            scope = self.names(module)
            for path, _alias in module.uses:
                segments = path[:-1] if path[-1] in ("*", "self") else path
                target = self.resolve(module, segments, scope) if segments else None
                if target is not None:
                    targets.add(self.room(target))
            code = _USE.sub(" ", self.own_text(module))
            for m in path_re.finditer(code):
                target = self.resolve(module, m.group(1).split("::"), scope)
                if target is not None:
                    targets.add(self.room(target))
            targets.discard(room)
        return graph


def _use_tree(tree: str) -> list[tuple[list[str], str | None]]:
    """The paths a ``use`` tree imports, each with its alias: ``a::{b, c::{d as
    e, self}}`` -> ``[(["a", "b"], None), (["a", "c", "d"], "e"), (["a", "c",
    "self"], None)]``."""
    tokens = re.findall(rf"{_IDENT}|::|[{{}},*]", tree)
    out: list[tuple[list[str], str | None]] = []

    def parse(k: int, prefix: list[str]) -> int:
        path = list(prefix)
        while k < len(tokens):
            token = tokens[k]
            if token == "{":
                k += 1
                while tokens[k] != "}":
                    k = parse(k, path)
                    if tokens[k] == ",":
                        k += 1
                return k + 1
            if token in (",", "}"):
                break
            if token == "as":
                out.append((path, tokens[k + 1]))
                return k + 2
            if token != "::":
                path.append(token)
            k += 1
        if path != prefix:
            out.append((path, None))
        return k

    parse(0, [])
    return out


_FN = re.compile(rf"\bfn\s+({_IDENT})")


def functions(src: Path) -> list[tuple[str, str, int]]:
    """``(file, fn name, lines)`` of every ``fn`` with a body in ``src``
    (tests too): its lines as written, from the ``fn`` line to the line of
    its closing brace."""
    found = []
    for file in sorted(src.rglob("*.rs")):
        text = blank(file.read_text(encoding="utf-8"))
        for m in _FN.finditer(text):
            end = item_end(text, m.end())
            if text[end - 1] != "}":
                continue  # a declaration without a body (a trait's)
            first = text.count("\n", 0, m.start())
            last = text.count("\n", 0, end - 1)
            found.append((file.relative_to(src).as_posix(), m.group(1), last - first + 1))
    return found
