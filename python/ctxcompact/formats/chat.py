"""OpenAI Chat Completions message lists, and the agent logs built on them.

Mapping (docs/formats.md): system/developer -> system message; user -> user
message (text and image parts); assistant -> assistant message with a text
part and one tool part per call; a ``role: tool`` result is folded into the
tool part of its call (completed, with the output). Keys the canonical model
has no field for are kept under ``source`` on the message or part, so
``to_openai_chat(from_openai_chat(x)) == x`` whenever each call's results
directly follow it (the order every API requires).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxcompact._json import loads
from ctxcompact.errors import FormatError
from ctxcompact.formats.jsonl import iterable, json_kind
from ctxcompact.formats.source import (
    claude_code_record,
    image_block,
    message_owner,
    session_record,
    source_dict,
    source_of,
    text_record,
)
from ctxcompact.formats.usage import openai_usage
from ctxcompact.models import MessageWithParts, Part, Session, SessionInfo, ToolState
from ctxcompact.scans.content import custom_call

_MAPPED = {"role", "content", "tool_calls", "tool_call_id"}
#: The keys of an OpenAI chat message. A SWE-agent history message's other keys
#: (``agent``, ``thought``, ``action``, ``is_demo``, ``message_type``,
#: ``tool_call_ids``...) are kept together under ``SWE_AGENT_KEY``, which
#: ``to_swe_agent`` writes back in place and ``to_openai_chat`` leaves out.
CHAT_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio",
             "function_call")  # fmt: skip
SWE_AGENT_KEY = "swe_agent"
#: Content blocks only Anthropic has: a chat session holding one is an Anthropic
#: request read in the wrong format (its calls and results would be lost).
ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")


def _mid(session_id: str, i: int) -> str:
    return f"{session_id}-m{i:06d}"


def _content_parts(mid: str, content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [Part(id=f"{mid}-p00", type="text", text=content)]
    if not iterable(content):
        raise FormatError(f"content must be a string, an array or null, got {json_kind(content)}")
    parts = []
    for j, block in enumerate(content):
        pid = f"{mid}-p{j:02d}"
        if not isinstance(block, Mapping):
            raise FormatError(f"content[{j}] must be an object, got {json_kind(block)}")
        if block.get("type") in ANTHROPIC_BLOCKS:
            raise FormatError(f"not an OpenAI chat message: {mid} content[{j}] is an Anthropic "
                              f"{block['type']!r} block")  # fmt: skip
        if block.get("type") == "text":
            extra = {k: v for k, v in block.items() if k not in ("type", "text")}
            parts.append(Part(id=pid, type="text", text=block.get("text", ""),
                              **({"source": extra} if extra else {})))  # fmt: skip
        elif block.get("type") == "image_url":
            url = (block.get("image_url") or {}).get("url", "")
            parts.append(Part(id=pid, type="file", mime="image/*", url=url, source=block))
        else:
            # another block (a refusal, a Responses input_text...) is kept whole,
            # and its text, if it has one, is the part's text
            key = block_text_key(block)
            text = block[key] if key else ""
            parts.append(Part(id=pid, type="text", text=text, source=block))
    return parts


def block_text_key(block: Mapping[str, Any]) -> str | None:
    """The key holding the text of a content block that is not a ``text`` block:
    ``refusal`` for a refusal, else ``text`` when it is a string."""
    if block.get("type") == "refusal" and isinstance(block.get("refusal"), str):
        return "refusal"
    return "text" if isinstance(block.get("text"), str) else None


def call_input(raw: Any) -> tuple[dict[str, Any], str | None]:
    """(tool input, why the arguments could not be read) of a call's ``arguments``:
    the object they hold; ``{}`` when they are missing, null or blank. Arguments
    that are not a JSON object (an array, a string, JSON cut off by a
    ``max_tokens`` stop) are input ``{}`` with the reason, which the reader keeps
    with the raw arguments in the tool state's ``metadata`` (as the live path
    does for a reply's arguments): the transcript is read, not refused, and what
    could not be read is on the record."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str):
        return {}, f"the arguments are {json_kind(raw)}, not a string holding a JSON object"
    try:
        parsed = loads(raw)
    except ValueError:
        return {}, "the arguments are not valid JSON (cut off?)"
    if not isinstance(parsed, dict):
        return {}, f"the arguments hold {json_kind(parsed)}, not a JSON object"
    return parsed, None


def call_state(raw: Any) -> ToolState:
    """A pending tool state for a call's ``arguments``; unreadable ones are input
    ``{}`` and ``metadata = {"arguments": raw, "error": why}``."""
    args, problem = call_input(raw)
    state = ToolState(status="pending", input=args)
    if problem is not None:
        state.metadata = {"arguments": raw, "error": problem}
    return state


def _arguments(raw: Any) -> tuple[ToolState, dict[str, Any]]:
    """(tool state, what to keep to write ``raw`` back exactly)."""
    state = call_state(raw)
    exact = isinstance(raw, str) and state.metadata is None and json.dumps(state.input) == raw
    return state, ({} if exact else {"arguments": raw})


def _custom_part(call: Mapping[str, Any], custom: Mapping[str, Any], pid: str, j: int) -> Part:
    """A custom tool call as a tool part: its name, its text as the input
    ``{"input": text}`` (what ``from_openai_response`` makes of a
    ``custom_tool_call``; no text or "" is ``{}``), the call kept whole in the
    source to write back."""
    for field, value in (("custom.name", custom.get("name")), ("id", call.get("id")),
                         ("custom.input", custom.get("input"))):  # fmt: skip
        if not (value is None or isinstance(value, str)):
            raise FormatError(f"tool_calls[{j}].{field} must be a string, got {json_kind(value)}")
    text = custom.get("input")
    state = ToolState(status="pending", input={"input": text} if text else {})
    rest = {k: v for k, v in call.items() if k != "id"}
    return Part(id=pid, type="tool", tool=custom.get("name"), callID=call.get("id"),
                state=state, source=rest)  # fmt: skip


def from_openai_chat(
    messages: Sequence[Mapping[str, Any]], session_id: str = "session", **info: Any
) -> Session:
    """A session from an OpenAI chat message list."""
    out: list[MessageWithParts] = []
    calls: dict[str, Part] = {}
    if not iterable(messages):
        raise FormatError(f"chat messages must be an array, got {json_kind(messages)}",
                          session_id=session_id)  # fmt: skip
    for i, raw in enumerate(messages):
        try:
            if not isinstance(raw, Mapping) or "role" not in raw:
                raise FormatError(f"message {i} is not a chat message (no role)", row=i,
                                  session_id=session_id)  # fmt: skip
            role = raw["role"]
            mid = str(raw.get("id") or _mid(session_id, i))
            extra = {k: v for k, v in raw.items() if k not in _MAPPED}
            if role == "tool":
                part = calls.get(str(raw.get("tool_call_id")))
                if part is None or part.state is None or part.state.status != "pending":
                    # orphaned (or second) result: kept as its own message, never dropped
                    text = Part(id=f"{mid}-p00", type="text",
                                text=str(raw.get("content") or ""), synthetic=True)  # fmt: skip
                    out.append(MessageWithParts.of("user", mid, session_id, [text], source={**raw}))
                    continue
                content = raw.get("content")
                part.state.status = "completed"
                part.state.output = content if isinstance(content, str) else json.dumps(content)
                keep = {k: v for k, v in raw.items() if k not in ("role", "tool_call_id")}
                if not isinstance(content, str):
                    keep["content"] = content
                else:
                    keep.pop("content")
                if keep:
                    part.__pydantic_extra__ = {**(part.model_extra or {}), "result_source": keep}
                continue
            src = {"source": extra} if extra else {}
            if role in ("system", "developer"):
                if role == "developer":
                    src = {"source": {**extra, "role": "developer"}}
                parts = _content_parts(mid, raw.get("content"))
                out.append(MessageWithParts.of("system", mid, session_id, parts, **src))
            elif role == "user":
                parts = _content_parts(mid, raw.get("content"))
                out.append(MessageWithParts.of("user", mid, session_id, parts, **src))
            elif role == "assistant":
                content = raw.get("content")
                parts = _content_parts(mid, content)
                if content is None:
                    src = {"source": {**extra, "content": None}}
                calls_in = raw.get("tool_calls") or []
                if not iterable(calls_in):
                    raise FormatError(f"tool_calls must be an array, got {json_kind(calls_in)}")
                for j, call in enumerate(calls_in):
                    if not isinstance(call, Mapping):
                        raise FormatError(f"tool_calls[{j}] must be an object, "
                                          f"got {json_kind(call)}")  # fmt: skip
                    fn = call.get("function") or {}
                    if not isinstance(fn, Mapping):
                        raise FormatError(f"tool_calls[{j}].function must be an object, "
                                          f"got {json_kind(fn)}")  # fmt: skip
                    if (custom := custom_call(call)) is not None:
                        parts.append(part := _custom_part(call, custom, f"{mid}-t{j:02d}", j))
                        calls[str(call.get("id"))] = part
                        continue
                    state, keep = _arguments(fn.get("arguments"))
                    rest = {k: v for k, v in call.items() if k not in ("id", "function", "type")}
                    if call.get("type", "function") != "function":
                        rest["type"] = call.get("type")
                    source = {"source": {**rest, **keep}} if rest or keep else {}
                    part = Part(id=f"{mid}-t{j:02d}", type="tool", tool=fn.get("name"),
                                callID=call.get("id"), state=state,
                                **source)  # fmt: skip
                    calls[str(call.get("id"))] = part
                    parts.append(part)
                # a logged reply's usage: read, and kept in the source to write back
                try:
                    tokens = openai_usage(raw.get("usage"), "usage")
                except FormatError as e:
                    raise FormatError(f"message {i}: {e}", row=i, session_id=session_id,
                                      message_id=mid) from None  # fmt: skip
                usage = {"tokens": tokens} if tokens else {}
                out.append(MessageWithParts.of("assistant", mid, session_id, parts, **src, **usage))
            else:
                raise FormatError(f"message {i} has an unknown role {role!r}", row=i, column="role",
                                  session_id=session_id)  # fmt: skip
        except FormatError as e:
            if e.row is not None:
                raise
            raise FormatError(f"message {i}: {e}", row=i, session_id=session_id) from None
        except (TypeError, AttributeError) as e:  # a field of the wrong JSON type
            raise FormatError(f"message {i} has a field of the wrong type ({e})", row=i,
                              session_id=session_id) from None  # fmt: skip
    return Session(info=SessionInfo(id=session_id, **info), messages=out)


def _content_out(message: MessageWithParts, *, foreign: bool = False) -> Any:
    """The chat ``content`` of a message's text and file parts: one plain text
    as a string, else a list of chat blocks. ``foreign``: the message was read
    from another format (a Responses ``message`` item, an Anthropic turn), so
    its parts' sources are that format's blocks (a Responses ``input_text`` /
    ``output_text`` block, kept without its text), not chat content: each text
    is written as a chat ``text`` block (or a string), as a part built
    elsewhere is. What of a text part's record is no chat block's (a
    pydantic-ai part, an Anthropic block's ``citations``) is left out
    (``text_record``)."""
    texts = [p for p in message.parts if p.type in ("text", "file")]
    kept_of = {p.id: None if foreign else _block_record(p) for p in texts}
    if len(texts) == 1 and texts[0].type == "text" and kept_of[texts[0].id] is None:
        return texts[0].text
    if not texts:
        return ""
    blocks = []
    for p in texts:
        kept = kept_of[p.id]
        if p.type == "file":
            blocks.append(_image_block(p, source_of(p)))  # an image block of any format
        elif kept is not None and "type" in kept:
            key = block_text_key(kept)
            blocks.append({**kept, key: p.text or ""} if key else kept)
        else:
            blocks.append({"type": "text", "text": p.text or "", **(kept or {})})
    return blocks


def _block_record(part: Part) -> dict[str, Any] | None:
    """What of a text part's record a chat block keeps: a whole chat block read
    as it was (a refusal...), else a chat text block's other keys; ``None``
    when there is nothing of chat's."""
    source = source_of(part)
    if isinstance(source, dict) and "type" in source:
        return source
    return text_record(part, "openai-chat") or None


#: The ``type`` of a tool call's record kept by another format (a Responses
#: ``function_call`` or ``custom_tool_call`` item, an Anthropic ``tool_use`` block).
_FOREIGN_CALL_TYPES = ("function_call", "custom_tool_call", "tool_use")


def _call_source(part: Part) -> dict[str, Any]:
    """What a chat ``tool_calls`` entry keeps of a tool part's source: all of it
    when the call was read from chat (its keys beside ``id`` / ``function``, a
    raw ``arguments`` string), else nothing but a Responses call's raw
    ``arguments`` (the same JSON string chat holds). Another format's record (an
    Anthropic ``tool_use`` block with its ``name`` / ``input``, a Responses item,
    a pydantic-ai part) goes back only into that format."""
    keep = source_dict(part)
    if keep.get("type") == "function_call":
        return {"arguments": keep["arguments"]} if isinstance(keep.get("arguments"), str) else {}
    if keep.get("type") in _FOREIGN_CALL_TYPES or "part_kind" in keep:
        return {}
    return keep


def _image_block(part: Part, source: dict[str, Any] | None) -> dict[str, Any]:
    """A chat image block for a file part: its own block when read from chat, else
    the image's URL (an Anthropic base64 image as a ``data:`` URL), else a text
    naming the image (never a block of another format, never empty)."""
    if source is not None and source.get("type") == "image_url":
        return source
    return image_block(part, lambda url: {"type": "image_url", "image_url": {"url": url}})


def to_openai_chat(session: Session) -> list[dict[str, Any]]:
    """The session as an OpenAI chat message list (tool results right after their call)."""
    return [_agent_keys(m, expand=False) for m in _chat_messages(session)]


def _agent_keys(message: dict[str, Any], *, expand: bool) -> dict[str, Any]:
    """A written message with a SWE-agent message's own keys put back in their
    place (``expand``), or left out (a chat message holds only chat keys)."""
    if SWE_AGENT_KEY not in message:
        return message
    out: dict[str, Any] = {}
    for key, value in message.items():
        if key != SWE_AGENT_KEY:
            out[key] = value
        elif expand and isinstance(value, Mapping):
            out.update(value)
    return out


def _chat_messages(session: Session) -> list[dict[str, Any]]:
    """The chat messages of ``session``, SWE-agent keys still nested."""
    out: list[dict[str, Any]] = []
    answered = {
        p.callID for m in session.messages for p in m.parts
        if p.type == "tool" and p.state is not None and p.state.status in ("completed", "error")
    }  # fmt: skip
    for message in session.messages:
        info = message.info
        source = source_dict(info)
        if message.parts and all(
            p.type == "tool-result" and p.callID in answered for p in message.parts
        ):
            continue  # a turn of results (Anthropic, Responses): each follows its call
        # a Responses item, an Anthropic turn or a pydantic-ai message: its
        # record holds no chat keys, and its parts' records no chat blocks
        foreign = message_owner(source) not in (None, "openai-chat")
        if foreign:
            source = {k: v for k, v in source.items() if k in ("role", "name")}
        if (info.role == "system" and not message.parts
                and claude_code_record(source_of(info, claude_code=True))):  # fmt: skip
            continue  # nothing the model reads (a Claude Code title or file snapshot)
        if info.role == "system":
            role = source.pop("role", "system")
            out.append({"role": role, "content": _content_out(message, foreign=foreign), **source})
        elif info.role == "user":
            if source.get("role") == "tool":  # an orphaned result, as it was
                out.append(source)
                continue
            said = _content_out(message, foreign=foreign)
            out.append({"role": "user", "content": said, **source})
        else:
            observed = [p for p in message.parts if is_observed(p)]
            tools = [p for p in message.parts if p.type == "tool" and not is_observed(p)]
            texts = [p for p in message.parts if p.type in ("text", "file")]
            content: Any = None if tools else ""
            if "content" in source and source["content"] is None:
                content = None  # read as null: written back as null
            elif texts:
                content = _content_out(message, foreign=foreign)
            source.pop("content", None)
            entry: dict[str, Any] = {"role": "assistant", "content": content, **source}
            results = []
            if tools:
                entry["tool_calls"] = []
                for p in tools:
                    keep = _call_source(p)
                    arguments = keep.pop("arguments", None)
                    if arguments is None:
                        arguments = json.dumps((p.state.input if p.state else None) or {})
                    call_type = keep.pop("type", "function")
                    function = {"name": p.tool or "", "arguments": arguments}
                    if call_type == "custom" and isinstance(keep.get("custom"), Mapping):
                        function = {}  # a custom call read from chat: written back as it was
                    entry["tool_calls"].append(
                        {"id": p.callID or p.id, "type": call_type,
                         **({"function": function} if function else {}), **keep}
                    )  # fmt: skip
                    if p.state is not None and p.state.status in ("completed", "error"):
                        result = source_dict(p, "result_source")
                        body = result.pop("content", None)
                        if body is None:
                            body = (
                                p.state.output if p.state.status == "completed" else p.state.error
                            )
                        results.append({"role": "tool", "tool_call_id": p.callID or p.id,
                                        "content": body, **result})  # fmt: skip
            out.append(entry)
            out.extend(results)
            for p in observed:  # a text-protocol step: its observation, as it was
                observation = source_dict(p)["observation"]
                out.append({"role": "user", "content": p.state.output if p.state else "",
                            **observation})  # fmt: skip
    return out


# --- text-protocol agents: a command in the reply, its result as the next user turn -----

#: ASCII whitespace: what splits a SWE-agent action (the same in the native reader).
_WS = " \t\n\r\x0b\x0c"
#: mini-swe-agent's command block (```mswea_bash_command, or ```bash in older runs).
_MINI_COMMAND = re.compile(r"```(?:mswea_bash_command|bash)[ \t]*\n(.*?)\n?```", re.DOTALL)


def is_observed(part: Part) -> bool:
    """A tool part made from a text-protocol step (its result was a user turn)."""
    source = source_of(part)
    return part.type == "tool" and isinstance(source, Mapping) and "observation" in source


def swe_agent_command(message: MessageWithParts) -> tuple[str, str] | None:
    """(tool, command) of a SWE-agent text-protocol step: its ``action`` field."""
    agent = source_dict(message.info).get(SWE_AGENT_KEY)
    action = agent.get("action") if isinstance(agent, Mapping) else None
    if not isinstance(action, str) or not action.strip(_WS):
        return None
    return re.split(f"[{_WS}]", action.strip(_WS), maxsplit=1)[0], action


def mini_swe_agent_command(message: MessageWithParts) -> tuple[str, str] | None:
    """(tool, command) of a mini-swe-agent step: the first command block of its text."""
    for p in message.parts:
        if p.type == "text" and p.text:
            found = _MINI_COMMAND.search(p.text)
            if found:
                return "bash", found.group(1)
    return None


def _observation(message: MessageWithParts) -> str | None:
    """The text of a user turn that can be a step's observation (one plain text
    part, not an orphaned tool result), else ``None``."""
    if message.role != "user" or len(message.parts) != 1:
        return None
    part = message.parts[0]
    if part.type != "text" or part.model_extra or "role" in source_dict(message.info):
        return None
    return part.text or ""


def pair_observations(session: Session, command: Any) -> Session:
    """Each assistant step with a command (``command(message)`` -> (tool, command))
    and no tool calls, answered by the next user turn, gets a completed tool part
    holding that turn as its output; the turn is folded into the part (its keys
    kept under ``source.observation``), so prune can clear it and
    ``to_openai_chat`` writes it back unchanged. A step with no answer stays text."""
    out: list[MessageWithParts] = []
    messages = session.messages
    i = 0
    while i < len(messages):
        message = messages[i]
        answer = messages[i + 1] if i + 1 < len(messages) else None
        found = None
        if message.role == "assistant" and all(p.type != "tool" for p in
                                                              message.parts):  # fmt: skip
            found = command(message)
        output = _observation(answer) if found is not None and answer is not None else None
        if found is None or answer is None or output is None:
            out.append(message)
            i += 1
            continue
        tool, line = found
        part = Part(id=f"{message.id}-t00", type="tool", callID=f"{message.id}-action", tool=tool,
                    state=ToolState(status="completed", input={"command": line}, output=output),
                    source={"observation": source_dict(answer.info)})  # fmt: skip
        out.append(message.model_copy(update={"parts": [*message.parts, part]}))
        i += 2
    return session.model_copy(update={"messages": out})


# --- logs built on chat messages -------------------------------------------------------


def from_tau_bench(runs: Sequence[Mapping[str, Any]]) -> list[Session]:
    """tau-bench results: ``[{task_id, reward, info, traj: [chat messages], trial}]``."""
    if not iterable(runs):
        raise FormatError(f"tau-bench results must be a list of runs, got {json_kind(runs)}")
    sessions = []
    for i, run in enumerate(runs):
        if not isinstance(run, Mapping) or "traj" not in run:
            raise FormatError(f"run {i} has no 'traj'", row=i)
        sid = f"tau-{run.get('task_id', i)}-{run.get('trial', 0)}"
        rest = {k: v for k, v in run.items() if k != "traj"}
        sessions.append(from_openai_chat(run["traj"], sid, source=rest))
    return sessions


def to_tau_bench(sessions: Sequence[Session]) -> list[dict[str, Any]]:
    """Runs; a session that did not come from tau-bench gets its id as ``task_id``
    (a run's session id is made of ``task_id`` and ``trial`` only), and no
    other format's record (``session_record``)."""
    runs = []
    for s in sessions:
        source = session_record(s.info, "tau-bench")
        source.setdefault("task_id", s.id)
        runs.append({**source, "traj": to_openai_chat(s)})
    return runs


def from_swe_agent(traj: Mapping[str, Any], session_id: str = "swe-agent") -> Session:
    """A SWE-agent ``.traj``: ``history`` is chat messages with agent fields
    (``thought``, ``action``, ``agent``...) and, with function calling,
    ``tool_calls`` / ``tool_call_ids``."""
    if not isinstance(traj, Mapping):
        raise FormatError(f"a trajectory must be an object, got {json_kind(traj)}",
                          session_id=session_id)  # fmt: skip
    history = traj.get("history")
    if not isinstance(history, list):
        raise FormatError(f"{session_id}: a .traj needs a 'history' list", session_id=session_id)
    messages = []
    for i, m in enumerate(history):
        if not isinstance(m, Mapping):
            raise FormatError(f"history[{i}] must be an object, got {json_kind(m)}", row=i,
                              session_id=session_id)  # fmt: skip
        m = dict(m)
        ids = m.get("tool_call_ids")
        if m.get("role") == "tool" and "tool_call_id" not in m and ids:
            m["tool_call_id"] = ids[0]
        messages.append(_nest_agent_keys(m))
    rest = {k: v for k, v in traj.items() if k != "history"}
    return pair_observations(from_openai_chat(messages, session_id, source=rest), swe_agent_command)


def _nest_agent_keys(message: dict[str, Any]) -> dict[str, Any]:
    """The message with its keys that are not chat keys under ``SWE_AGENT_KEY``,
    in the place of the first of them (the native reader does the same)."""
    if all(k in CHAT_KEYS for k in message):
        return message
    out: dict[str, Any] = {}
    agent: dict[str, Any] = {}
    for key, value in message.items():
        if key in CHAT_KEYS:
            out[key] = value
        else:
            out.setdefault(SWE_AGENT_KEY, agent)
            agent[key] = value
    return out


def from_mini_swe_agent(traj: Any, session_id: str = "mini-swe-agent") -> Session:
    """A mini-swe-agent trajectory: its message list, or ``{"messages": [...], ...}``
    (``info``, ``trajectory_format``... kept as the session's source). Each reply's
    command block and the observation answering it become one tool part."""
    if isinstance(traj, Mapping):
        messages = traj.get("messages")
        if not isinstance(messages, list):
            raise FormatError(f"{session_id}: a mini-swe-agent trajectory needs a 'messages' list",
                              session_id=session_id)  # fmt: skip
        if "system" in traj:
            raise FormatError(f"{session_id}: not a mini-swe-agent trajectory: it has a "
                              "top-level 'system' (an Anthropic request?)",
                              session_id=session_id)  # fmt: skip
        rest = {k: v for k, v in traj.items() if k != "messages"}
        session = from_openai_chat(messages, session_id, **({"source": rest} if rest else {}))
    else:
        session = from_openai_chat(traj, session_id)
    return pair_observations(session, mini_swe_agent_command)


def to_mini_swe_agent(session: Session) -> Any:
    """The trajectory as it was read: ``{..., "messages"}`` when the session has
    a mini-swe-agent record (the keys beside the messages; another format's
    is left out, ``session_record``), else the bare message list when it
    has mini-swe-agent steps. Any other session (from elsewhere, or a list in
    which no step was found) is written as ``{"trajectory_format":
    "mini-swe-agent-1", "messages"}``, which says what it is; its tool calls stay
    chat tool calls."""
    messages = to_openai_chat(session)
    source = session_record(session.info, "mini-swe-agent")
    if not source and not any(is_observed(p) for m in session.messages for p in m.parts):
        source = {"trajectory_format": "mini-swe-agent-1"}
    return {**source, "messages": messages} if source else messages


def looks_like_mini_swe_agent(messages: Sequence[Any]) -> bool:
    """A chat list with a mini-swe-agent step: a command block answered by a
    ``<returncode>`` observation."""
    for m, answer in itertools.pairwise(messages):
        if (isinstance(m, Mapping) and m.get("role") == "assistant"
                and isinstance(m.get("content"), str) and _MINI_COMMAND.search(m["content"])
                and isinstance(answer, Mapping) and answer.get("role") == "user"
                and str(answer.get("content") or "").startswith("<returncode>")):  # fmt: skip
            return True
    return False


def to_swe_agent(session: Session) -> dict[str, Any]:
    """A ``.traj``: its record (``environment``, ``trajectory``, ``info``... only
    when it is SWE-agent's, ``session_record``) and the ``history``."""
    history = []
    for m in _chat_messages(session):
        m = _agent_keys(m, expand=True)
        if m.get("role") == "tool" and "tool_call_ids" in m:
            m = {k: v for k, v in m.items() if k != "tool_call_id"}
        history.append(m)
    return {**session_record(session.info, "swe-agent"), "history": history}


def is_chat_list(obj: Any) -> bool:
    return (
        isinstance(obj, list)
        and bool(obj)
        and all(isinstance(m, Mapping) and m.get("role") in
                ("system", "developer", "user", "assistant", "tool") for m in obj)
    )  # fmt: skip


__all__ = [
    "from_mini_swe_agent",
    "from_openai_chat",
    "from_swe_agent",
    "from_tau_bench",
    "is_chat_list",
    "looks_like_mini_swe_agent",
    "to_mini_swe_agent",
    "to_openai_chat",
    "to_swe_agent",
    "to_tau_bench",
]
