"""Every real sample converted to every format and read back: the model is sent
the same messages, apart from the losses docs/formats.md (Limits) names.

One hop (sample -> target -> read back) for every sample and target, and two
hops (sample -> a -> b -> read back) for one small sample of each source
format: a writer that puts one format's record into another (an Anthropic
``tool_use`` block in a chat call) may read back well once and lose the
result on the next hop.

Allowed differences, each checked to be only that:

- ``openhands`` holds only sessions read from OpenHands (a ``FormatError``);
- a text-protocol step (SWE-agent, mini-swe-agent) written to a format that
  cannot hold it (``formats.losses`` says so) reads back as text: the reply
  without its call, the observation as a user turn (an empty one is sent as
  nothing);
- a system prompt written to ``claude-code`` (which stores none; ``formats.losses``
  says so) reads back as a hook note, not model input;
- Responses items read back one message per item, so one assistant turn with
  text and calls is sent as several (docs/formats.md says so): only when the
  difference is exactly that, the same texts, calls and results.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact import formats
from ctxcompact.errors import FormatError
from ctxcompact.formats.anthropic import claude_code_sessions
from ctxcompact.formats.chat import is_observed
from ctxcompact.models import Session

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
SAMPLES = sorted(
    p for p in DATA.rglob("*") if p.suffix in (".json", ".jsonl", ".traj") and p.is_file()
) if DATA.exists() else []  # fmt: skip
#: One small sample of each source format, for the two-hop check.
HOP_SAMPLES = [
    DATA / "formats" / "claude-code" / "claude-code-transcripts" / "sample_session.jsonl",
    DATA / "formats" / "claude-code" / "claude-code-log" / "representative_messages.jsonl",
    DATA / "transcripts" / "swe-agent" / "trajectories" / "demonstrations"
    / "function_calling_simple.traj",
    DATA / "transcripts" / "swe-agent" / "trajectories" / "demonstrations" / "ctf" / "rev"
    / "rock.traj",
    DATA / "transcripts" / "mini-swe-agent" / "local.traj.json",
    DATA / "transcripts" / "openhands" / "tests_runtime_trajs_basic_gui_mode.json",
    DATA / "transcripts" / "openhands" / "tests_unit_resolver_mock_output_output.jsonl",
]  # fmt: skip
TARGETS = formats.FORMATS
needs = pytest.mark.skipif(not SAMPLES, reason="../shared/data is not beside this checkout")

View = list[dict[str, Any]]


def _name(path: Path) -> str:
    return str(path.relative_to(DATA))


@functools.cache
def _read(path: Path) -> list[Session]:
    if path.name == "edge_cases.jsonl":
        # junk lines on purpose (13-16: not Claude Code events): its events only
        lines = [line for line in path.read_text("utf-8").splitlines() if line.strip()]
        events = [e for e in map(json.loads, lines) if isinstance(e, dict) and "type" in e]
        return claude_code_sessions(events, "edge_cases")  # grouped as a file's lines are
    return formats.read(path)


def _views(sessions: Sequence[Session]) -> list[View]:
    return [cc.to_model_messages(s) for s in sessions]


def _write_read(sessions: Sequence[Session], fmt: str, tmp_path: Path, tag: str) -> list[Session]:
    jsonl = len(sessions) > 1 or fmt in ("claude-code", "opencode-messages")
    out = tmp_path / f"{tag}.{fmt}{'.jsonl' if jsonl else '.json'}"
    formats.write(sessions, out, fmt)
    return formats.read(out, fmt)


def _as_text_steps(view: View, ids: set[str]) -> View:
    """``view`` with the text-protocol steps of ``ids`` as a format without them
    sends them: the reply without its call, the observation as a user turn."""
    out: View = []
    for m in view:
        calls = m.get("tool_calls") or []
        if m["role"] == "assistant" and calls and all(c["id"] in ids for c in calls):
            m = {k: v for k, v in m.items() if k != "tool_calls"}
        elif m["role"] == "tool" and m.get("tool_call_id") in ids:
            if not m.get("content"):
                continue  # an empty user turn is sent as nothing
            m = {"role": "user", "content": m["content"]}
        out.append(m)
    return out


def _events_of(view: View) -> list[str]:
    """What ``view`` says, in no order: each text, call and result."""
    said = []
    for m in view:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        if content:
            said.append(json.dumps([m["role"], m.get("tool_call_id"), content]))
        for c in m.get("tool_calls") or []:
            fn = c["function"]
            said.append(json.dumps(["call", c["id"], fn["name"], json.loads(fn["arguments"])]))
    return sorted(said)


def _made_ids(views: list[View]) -> list[View]:
    """``views`` with the call ids a reader makes up for a text-protocol step
    (``<message id>-action``, the message id made of the file's name) numbered
    in order: a file of another name reads back with other such ids."""
    out = []
    for view in views:
        text = json.dumps(view)
        for n, made in enumerate(dict.fromkeys(re.findall(r'"([^"]*-action)"', text))):
            text = text.replace(f'"{made}"', f'"step-{n}"')
        out.append(json.loads(text))
    return out


def _check(original: list[Session], back: list[Session], hops: Sequence[str],
           losses: Sequence[str]) -> None:  # fmt: skip
    """``back`` sends what ``original`` does, apart from the allowed differences
    (``losses``: what ``formats.losses`` said of the hops)."""
    assert len(back) == len(original)  # (the ids: those a format holds, or the file's name)
    want, got = _made_ids(_views(original)), _made_ids(_views(back))
    if got == want:
        return
    allowed = [want]
    ids = {p.callID for s in original for m in s.messages for p in m.parts
           if is_observed(p) and p.callID}  # fmt: skip
    if losses:  # documented losses: text-protocol steps as text, ...
        allowed.append(_made_ids([_as_text_steps(v, ids) for v in _views(original)]))
        # ... and a system prompt written to claude-code, which stores none
        if "claude-code" in hops and any("system prompt" in loss for loss in losses):
            allowed += [[[m for m in v if m["role"] != "system"] for v in w] for w in allowed]
    # a text-protocol step written to a format with tool calls is one there
    # (its reply and observation sent as a call and its result): the same texts
    # (after a first hop its ids are made of the middle file's name: "<...>-action")
    made = ids | {c["id"] for v in _views(back) for m in v for c in m.get("tool_calls") or []
                  if str(c.get("id", "")).endswith("-action")}  # fmt: skip
    sent = [got, _made_ids([_as_text_steps(v, made) for v in _views(back)])] if ids else [got]
    if any(view in allowed for view in sent):
        return
    # Responses items are one message each (docs/formats.md): the same texts,
    # calls and results, one assistant turn sent as several messages
    if "openai-responses" in hops and any(
        [_events_of(v) for v in expected] == [_events_of(v) for v in view]
        for expected in allowed
        for view in sent
    ):
        return
    assert got == want


@needs
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sample", SAMPLES, ids=_name)
def test_every_sample_converts_to_every_format_and_back(
    sample: Path, target: str, tmp_path: Path
) -> None:
    original = _read(sample)
    try:
        back = _write_read(original, target, tmp_path, sample.stem)
    except FormatError as e:
        assert target == "openhands" and "did not come from an OpenHands stream" in str(e)
        return
    _check(original, back, [target], formats.losses(original, target))


@needs
@pytest.mark.parametrize("first", [t for t in TARGETS if t != "openhands"])
@pytest.mark.parametrize("sample", HOP_SAMPLES, ids=_name)
def test_two_hops_through_every_pair_of_formats(sample: Path, first: str, tmp_path: Path) -> None:
    # Claude Code -> openai-chat -> anthropic wrote the calls without ids and
    # dropped every tool output (the chat calls carried the tool_use blocks)
    original = _read(sample)
    middle = _write_read(original, first, tmp_path, "a")
    lost_first = formats.losses(original, first)
    for second in TARGETS:
        if second == "openhands":
            continue
        back = _write_read(middle, second, tmp_path, f"b-{second}")
        lost = [*lost_first, *formats.losses(middle, second)]
        try:
            _check(original, back, [first, second], lost)
        except AssertionError as e:
            raise AssertionError(f"{sample.name} -> {first} -> {second}: {e}") from None
