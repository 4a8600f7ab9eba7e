"""The binding's writer of a chat list (``_core.chat_list_json``,
rust/src/python/chat_json.rs) against the ``json.dumps`` path it replaces
(``chatrows._dumps_json``): whenever it answers, the core reads the same
JSON; whatever it does not take (a subclass, a non-string key, a NaN, a lone
surrogate, an object) it leaves to that path, so counts and errors are the
ones ``json.dumps`` gave."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import ctxcompact._core as _core
import pytest
from ctxcompact.errors import FormatError
from ctxcompact.scans.chatrows import _SESSION, _chat_json, _dumps_json, chat_counts
from hypothesis import given, settings
from hypothesis import strategies as st

_KEYS = st.sampled_from(["role", "content", "id", "ctxcompact_at", "name", "tool_call_id", "x"])
_SCALARS = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
)  # fmt: skip
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)  # fmt: skip
_MESSAGES = st.lists(
    st.dictionaries(_KEYS, _VALUES | st.sampled_from(["tool", "user", "assistant"]), max_size=5),
    max_size=5,
)


def _written(messages: Any) -> bytes:
    data = _core.chat_list_json(messages, session=_SESSION)
    assert data is not None
    return data


@settings(max_examples=300, deadline=None)
@given(_MESSAGES)
def test_the_binding_writes_what_json_dumps_wrote(messages: list[dict[str, Any]]) -> None:
    """Plain JSON values: the same object, key order included (the core keeps
    it), a tool message's own ``ctxcompact_at`` replaced where it stands."""
    got = json.loads(_written(messages), object_pairs_hook=list)
    assert got == json.loads(_dumps_json(messages), object_pairs_hook=list)


def test_number_text_is_pythons() -> None:
    """Floats as ``float.__repr__``, ints beyond 64 bits as their digits (the
    core keeps a number's text)."""
    message = {"role": "user", "content": "a", "x": [1e-05, 1e16, 100.0, 2**80, -(2**63), True]}
    text = json.dumps([1e-05, 1e16, 100.0, 2**80, -(2**63), True], separators=(",", ":"))
    assert text.encode() in _written([message])
    assert text.replace(",", ", ").encode() in _dumps_json([message])


class _Str(str):
    pass


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), _Str("s"), OrderedDict(a=1), {1: "a"}, object(), {"a"}, b"x"],
    ids=["nan", "inf", "str-subclass", "dict-subclass", "int-key", "object", "set", "bytes"],
)
def test_values_only_json_dumps_writes_are_left_to_it(value: Any) -> None:
    messages = [{"role": "user", "content": "hi", "extra": value}]
    assert _core.chat_list_json(messages, session=_SESSION) is None
    assert _chat_json(messages) == _dumps_json(messages) if value == value else True


def test_a_list_that_is_not_plain_is_left_to_json_dumps() -> None:
    assert _core.chat_list_json(({"role": "user", "content": "a"},), session=_SESSION) is None
    assert _core.chat_list_json([OrderedDict(role="user", content="a")], session=_SESSION) is None
    cycle: dict[str, Any] = {"role": "user", "content": "a"}
    cycle["self"] = [cycle]
    assert _core.chat_list_json([cycle], session=_SESSION) is None
    with pytest.raises(ValueError, match="Circular reference"):
        _chat_json([cycle])


def test_a_lone_surrogate_is_still_the_message_s_format_error() -> None:
    messages = [{"role": "user", "content": "ok"}, {"role": "user", "content": "bad \ud800"}]
    assert _core.chat_list_json(messages, session=_SESSION) is None
    with pytest.raises(FormatError, match="chat message 1 holds a lone surrogate") as e:
        chat_counts(messages)
    assert e.value.row == 1


def test_counts_are_those_of_the_json_dumps_path() -> None:
    messages = [
        {"role": "system", "content": "be brief", "id": "s"},
        {"role": "user", "content": "read a — ünïcode 🙂"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "read", "arguments": {"p": 1.5}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "text " * 40, "id": "t"},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    data = _dumps_json(messages)
    want = _core.chat_counts(data, len(messages), session=_SESSION)
    assert chat_counts(messages) == want
    assert json.loads(_written(messages)) == json.loads(data)
