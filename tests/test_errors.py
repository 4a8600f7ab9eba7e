"""Every error the package raises on purpose is a CompactionError.

Read from the source: a ``raise`` of a bare built-in exception in the package
is a defect (a user catching ``CompactionError`` would miss it). ``TypeError``
for an argument of the wrong Python type and ``NotImplementedError`` in
protocol stubs follow Python's own conventions and are allowed, and so is
``ValueError`` inside a pydantic validator (pydantic turns it into the
validation error that the config reports as ``ConfigError``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import ctxcompact
from ctxcompact import errors

PACKAGE = Path(ctxcompact.__file__).parent
BUILTINS = {"ValueError", "KeyError", "LookupError", "RuntimeError", "Exception", "OSError"}
ALLOWED = {"TypeError", "NotImplementedError", "AttributeError", "StopIteration"}


def _is_validator(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name.endswith("validator"):
            return True
    return False


def _walk(node: ast.AST) -> list[ast.AST]:
    """Every node under ``node``, leaving out the bodies of pydantic validators."""
    out = [node]
    for child in ast.iter_child_nodes(node):
        if not _is_validator(child):
            out.extend(_walk(child))
    return out


def _raised_names(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in _walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name):
                found.append((node.lineno, exc.id))
    return found


def test_no_bare_builtin_exception_is_raised() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "testing" in path.relative_to(PACKAGE).parts:
            continue  # test support (the reference mirrors the core, not the API)
        for line, name in _raised_names(ast.parse(path.read_text(encoding="utf-8"))):
            if name in BUILTINS:
                offenders.append(f"{path.relative_to(PACKAGE)}:{line} raises {name}")
    assert not offenders, offenders


def test_every_error_class_is_a_compaction_error() -> None:
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, errors.CompactionError), name


def test_a_lone_surrogate_in_a_chat_list_is_a_format_error_naming_the_message() -> None:
    """Found by tests/test_fuzz.py: the chat counts behind ``select_split`` wrote the
    list as UTF-8 and a lone surrogate (a str decoded from JSON) raised
    ``UnicodeEncodeError``; and a list longer than the size given to the core was
    an internal error."""
    import pytest
    from ctxcompact import _core
    from ctxcompact.scans.chatrows import chat_counts

    messages = [{"role": "user", "content": "a"}, {"role": "user", "\ud800x": 1, "content": "b"}]
    with pytest.raises(errors.FormatError, match="chat message 1 holds a lone surrogate") as e:
        chat_counts(messages)
    assert e.value.row == 1
    data = b'{"id":"chat","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}'
    with pytest.raises(errors.InvalidUsageError, match="index 1, past the 1 messages"):
        _core.chat_counts(data, 1, session="chat")
