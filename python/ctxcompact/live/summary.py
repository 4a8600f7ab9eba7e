"""The compaction agent: one tool-less model call that writes a continuation summary.

When the call fails (an exception, a timeout, an empty answer, or a summary
cut off at ``max_tokens``) the summarizer does not give up: it falls back to
a deterministic digest built without a model, and to plain truncation as the
last resort, so the agent loop always goes on and the reason is kept.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxcompact.clients.base import (
    AsyncSummaryClient,
    SummaryClient,
    SummaryRequest,
    SummaryResponse,
)
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, InputTypeError, SummaryError
from ctxcompact.estimators import EstimateMethod
from ctxcompact.live import prompts
from ctxcompact.scans.estimate import estimate_tokens
from ctxcompact.scans.view import COMPACTION_QUESTION

Source = Literal["model", "digest", "truncation"]
Message = Mapping[str, Any]


@dataclass(frozen=True)
class SummaryOutcome:
    text: str
    source: Source
    round: int
    #: Why the model's answer was not used (None when it was).
    error: str | None = None
    request: SummaryRequest | None = None
    response: SummaryResponse | None = None


class Summarizer:
    """Builds the summary request, calls the client, and falls back when it fails.

    ``client``: a ``SummaryClient`` and/or ``AsyncSummaryClient`` (None: always
    the fallback). ``model``: the session's model, used unless
    ``config.summary_model`` names a (cheaper) one.

    ``config.timeout_s`` bounds the whole call (retries included) on both
    paths; the request carries it and ``config.max_retries`` to the client,
    whose SDK applies them per attempt unless the client was given its own.
    """

    def __init__(
        self,
        client: SummaryClient | AsyncSummaryClient | None = None,
        config: CompactionConfig | None = None,
        *,
        model: str | None = None,
    ) -> None:
        if client is not None and not (hasattr(client, "complete") or hasattr(client, "acomplete")):
            raise InputTypeError(
                f"Summarizer takes a client with complete() or acomplete() (OpenAIClient, "
                f"AnthropicClient, ...) or None for the fallback, got {type(client).__name__}"
            )
        if config is not None and not isinstance(config, CompactionConfig):
            raise InputTypeError(f"config must be a CompactionConfig, got {type(config).__name__}")
        self.client = client
        #: False: built on the defaults, so a ``Compactor`` given a config shares it.
        self.configured = config is not None
        self.config = config or CompactionConfig()
        self.model = model

    # --- the request -------------------------------------------------------------------

    def build_request(
        self,
        history: Sequence[Message],
        *,
        previous_summary: str | None = None,
        round: int = 1,
        instructions: str | None = None,
        context: Sequence[str] = (),
    ) -> SummaryRequest:
        cfg = self.config
        parts: list[str] = []
        if context:
            parts.append("Context for these notes:\n" + "\n".join(f"- {c}" for c in context))
        if previous_summary and not any(
            content_text(m) == previous_summary for m in history if m.get("role") == "assistant"
        ):
            parts.append(f"Notes of compaction round {round - 1}:\n\n{previous_summary}")
        parts.append(cfg.summary_prompt or prompts.SUMMARY_REQUEST)
        if cfg.summary_template == "structured":
            parts.append(prompts.STRUCTURED_TEMPLATE.format(round=round))
        if previous_summary:
            parts.append(prompts.CHAINING_INSTRUCTION.format(round=round, previous=round - 1))
        if instructions:
            parts.append(f"Additional instructions for these notes:\n{instructions}")
        messages = [dict(m) for m in history if m.get("role") != "system"]
        messages.append({"role": "user", "content": "\n\n".join(parts)})
        return SummaryRequest(
            system=cfg.system_prompt or prompts.SYSTEM_PROMPT,
            messages=messages,
            model=cfg.summary_model or self.model,
            max_tokens=cfg.summary_max_tokens,
            temperature=cfg.summary_temperature,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
        )

    # --- the call ----------------------------------------------------------------------

    def summarize(
        self,
        history: Sequence[Message],
        *,
        previous_summary: str | None = None,
        round: int = 1,
        instructions: str | None = None,
        context: Sequence[str] = (),
    ) -> SummaryOutcome:
        request = self.build_request(
            history,
            previous_summary=previous_summary,
            round=round,
            instructions=instructions,
            context=context,
        )
        client = self.client
        if client is None:
            return self._chosen_digest(history, request, previous_summary, round)
        if not isinstance(client, SummaryClient):
            raise ConfigError("this client is async-only: use asummarize()")
        timeout = self.config.timeout_s
        try:
            response = _call_with_deadline(client.complete, request, timeout)
        except Exception as e:  # any failure of the call takes the fallback chain
            why = _describe(e, timeout)
            return self._fallback(history, request, previous_summary, round, why, e)
        return self._accept(history, request, response, previous_summary, round)

    async def asummarize(
        self,
        history: Sequence[Message],
        *,
        previous_summary: str | None = None,
        round: int = 1,
        instructions: str | None = None,
        context: Sequence[str] = (),
    ) -> SummaryOutcome:
        request = self.build_request(
            history,
            previous_summary=previous_summary,
            round=round,
            instructions=instructions,
            context=context,
        )
        client = self.client
        if client is None:
            return self._chosen_digest(history, request, previous_summary, round)
        timeout = self.config.timeout_s
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                if isinstance(client, AsyncSummaryClient):
                    response = await client.acomplete(request)
                else:  # a sync-only client must not block the event loop
                    response = await asyncio.to_thread(client.complete, request)
        except Exception as e:
            why = _describe(_Deadline() if deadline.expired() else e, timeout)
            return self._fallback(history, request, previous_summary, round, why, e)
        return self._accept(history, request, response, previous_summary, round)

    def _accept(
        self,
        history: Sequence[Message],
        request: SummaryRequest,
        response: SummaryResponse,
        previous_summary: str | None,
        round: int,
    ) -> SummaryOutcome:
        if response.finish == "length":
            why = f"the summary was cut off at max_tokens={request.max_tokens}"
            return self._fallback(history, request, previous_summary, round, why)
        if not response.text.strip():
            return self._fallback(history, request, previous_summary, round, "empty summary")
        return SummaryOutcome(response.text, "model", round, None, request, response)

    def _chosen_digest(
        self,
        history: Sequence[Message],
        request: SummaryRequest,
        previous_summary: str | None,
        round: int,
    ) -> SummaryOutcome:
        """No model was given: the digest is the summary asked for, not a
        fallback (no error, no ``compaction.fallback`` event)."""
        digest = build_digest(history, previous_summary=previous_summary, round=round,
                              chosen=True)  # fmt: skip
        return SummaryOutcome(digest, "digest", round, None, request)

    def _fallback(
        self,
        history: Sequence[Message],
        request: SummaryRequest,
        previous_summary: str | None,
        round: int,
        why: str,
        cause: BaseException | None = None,
    ) -> SummaryOutcome:
        policy = self.config.fallback
        if policy == "raise":
            raise SummaryError(f"summary generation failed: {why}") from cause
        if policy == "digest":
            digest = build_digest(history, previous_summary=previous_summary, round=round)
            return SummaryOutcome(digest, "digest", round, why, request)
        text = truncate_history(
            history, self.config.summary_max_tokens, method=self.config.estimate_method
        )
        return SummaryOutcome(text, "truncation", round, why, request)


class _Deadline(TimeoutError):
    pass


def _call_with_deadline(
    fn: Callable[[SummaryRequest], SummaryResponse], request: SummaryRequest, timeout: float
) -> SummaryResponse:
    """``fn(request)`` in a worker thread, given up after ``timeout`` seconds.

    A blocking client cannot be interrupted from outside, so the caller stops
    waiting instead: the abandoned call ends on its own (an SDK client gets
    the same timeout per attempt) and its result is dropped. The thread is a
    daemon so a hung call never holds up the interpreter's exit.
    """
    result: list[SummaryResponse] = []
    error: list[BaseException] = []
    done = threading.Event()
    context = contextvars.copy_context()  # tracing / logging context follows the call

    def run() -> None:
        try:
            result.append(context.run(fn, request))
        except BaseException as e:
            error.append(e)
        finally:
            done.set()

    threading.Thread(target=run, name="ctxcompact-summary", daemon=True).start()
    if not done.wait(timeout):
        raise _Deadline()
    if error:
        raise error[0]
    return result[0]


def _describe(e: BaseException, timeout: float) -> str:
    if isinstance(e, _Deadline):
        return f"the summary call timed out after {timeout:g} s (timeout_s)"
    if isinstance(e, TimeoutError):  # the client's own timeout
        return f"the summary call timed out ({type(e).__name__}: {e})"
    return f"{type(e).__name__}: {e}"


# --- the digest: a summary without a model --------------------------------------------

_PATH_KEYS = ("path", "file_path", "filePath", "filename", "file", "target_file", "notebook_path")
_ERROR = re.compile(r"^\s*(error\b|traceback|exception|fatal|failed|\[tool execution was)", re.I)
_CONTINUE = "continue if you have next steps"


def content_text(message: Mapping[str, Any]) -> str:
    """A chat message's content as text (its text blocks joined)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b
        )
    return ""


def is_request(message: Message) -> bool:
    """A user turn a person wrote (not the compaction marker or auto-continue)."""
    text = content_text(message).strip()
    return (
        message.get("role") == "user"
        and bool(text)
        and text != COMPACTION_QUESTION
        and text.lower() != _CONTINUE
    )


def _section(summary: str, title: str) -> str | None:
    """The body of ``### title`` (or ``#### title``) in a Markdown summary."""
    match = re.search(
        rf"^#{{2,4}}\s*{re.escape(title)}\s*\n(.*?)(?=^#{{2,4}}\s|\Z)", summary, re.M | re.S
    )
    return match.group(1).strip() if match else None


def _files(history: Sequence[Message]) -> list[str]:
    files: dict[str, None] = {}
    for message in history:
        for call in message.get("tool_calls") or []:
            try:
                args = json.loads(call.get("function", {}).get("arguments") or "{}")
            except (TypeError, ValueError):
                continue
            if not isinstance(args, dict):
                continue
            for key in _PATH_KEYS:
                if isinstance(args.get(key), str):
                    files[args[key]] = None
            for path in args.get("paths") or []:
                if isinstance(path, str):
                    files[path] = None
    return list(files)


def _errors(history: Sequence[Message]) -> list[str]:
    """Tool errors, each with what became of it (a later success of the same tool)."""
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in history:
        for call in message.get("tool_calls") or []:
            names[str(call.get("id"))] = str(call.get("function", {}).get("name", "tool"))
        if message.get("role") == "tool":
            results.append(
                (names.get(str(message.get("tool_call_id")), "tool"), content_text(message))
            )
    lines = []
    for i, (tool, text) in enumerate(results):
        if not _ERROR.match(text):
            continue
        first = _error_line(text)
        fixed = any(t == tool and not _ERROR.match(x) for t, x in results[i + 1 :])
        lines.append(f"- {tool}: {first} -> {'resolved later' if fixed else 'unresolved'}")
    return lines


_EXCEPTION = re.compile(r"^\s*[\w.]*(?:Error|Exception)\b.*$", re.M)


def _error_line(text: str) -> str:
    """The line that says what went wrong: a traceback's exception line (its
    last), else the output's first line."""
    if not text.strip():
        return "error"
    raised = _EXCEPTION.findall(text)
    line = raised[-1] if raised else text.strip().splitlines()[0]
    return line.strip()[:200]


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars].rstrip() + " [...]"


#: The digest's caps: each section is bounded, so a digest compaction cannot
#: make the session bigger however long the task, the file list or the errors.
TASK_CHARS = 4000
MAX_FILES = 50
MAX_ERRORS = 30


def _clip_task(task: str) -> str:
    if len(task) <= TASK_CHARS:
        return task
    return (task[:TASK_CHARS].rstrip()
            + f"\n[... the task was cut here: its first {TASK_CHARS} of {len(task)} characters "
            "are kept]")  # fmt: skip


def _capped(lines: list[str], most: int, what: str) -> list[str]:
    if len(lines) <= most:
        return lines
    return [*lines[:most], f"- ... and {len(lines) - most} more {what}"]


def build_digest(
    history: Sequence[Message],
    *,
    previous_summary: str | None = None,
    round: int = 1,
    chosen: bool = False,
) -> str:
    """A structured summary built from the history alone, deterministically;
    ``chosen``: no model was given (else a model call failed). Every section
    is capped (the task at ``TASK_CHARS``, saying where it was cut)."""
    requests = [m for m in history if is_request(m)]
    if previous_summary:
        task = _section(previous_summary, "Original Task") or previous_summary
    else:
        task = content_text(requests[0]) if requests else "(no user request in the history)"
    task = _clip_task(task)
    files = _capped([f"- {f}" for f in _files(history)], MAX_FILES, "files")
    errors = _capped(_errors(history), MAX_ERRORS, "errors")
    latest = [f"- {_clip(content_text(m), 500)}" for m in requests[-3:]]
    last_reply = next(
        (
            content_text(m)
            for m in reversed(history)
            if m.get("role") == "assistant" and content_text(m)
        ),
        "",
    )
    out = [
        f"{prompts.SUMMARY_HEADING} (Compaction Round {round})",
        "",
        "_Written without a model (none was given); built from the history._"
        if chosen
        else "_Written without a model (the summary call failed); built from the history._",
        "",
        "### Original Task",
        task,
        "",
        "### Files Touched",
        *(files or ["- (none recorded)"]),
        "",
        "### Errors & Resolutions",
        *(errors or ["- (none recorded)"]),
        "",
        "### Latest User Requests",
        *(latest or ["- (none)"]),
        "",
        "### Current State",
        _clip(last_reply, 1500) if last_reply else "(no assistant reply yet)",
    ]
    return "\n".join(out).strip() + "\n"


def truncate_history(
    history: Sequence[Message],
    max_tokens: int,
    *,
    method: EstimateMethod = "opencode",
) -> str:
    """The newest turns of ``history`` as text, as many as fit ``max_tokens``."""
    kept: list[str] = []
    used = 0
    for message in reversed(history):
        text = content_text(message).strip()
        if not text or message.get("role") == "system":
            continue
        line = f"{str(message.get('role', '?')).upper()}: {text}"
        cost = estimate_tokens(line, method)
        if used + cost > max_tokens:
            if not kept:  # even the newest turn is too long: keep its end
                kept.append(line[-max(1, max_tokens * 4) :])
            break
        kept.append(line)
        used += cost
    header = "[Earlier conversation truncated; the newest turns follow verbatim.]"
    return "\n\n".join([header, *reversed(kept)])


__all__ = ["Summarizer", "SummaryOutcome", "build_digest", "truncate_history"]
