"""The compaction agent: one tool-less model call that writes a continuation summary.

When the call fails (an exception, a timeout, an empty answer, or a summary
cut off at ``max_tokens``) the summarizer does not give up: it falls back to
a deterministic digest built without a model, and to plain truncation as the
last resort, so the agent loop always goes on and the reason is kept.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import ctxcompact._core as _core
import ctxcompact.live.prompts as prompts
from ctxcompact.clients.base import (
    AsyncSummaryClient,
    SummaryClient,
    SummaryRequest,
    SummaryResponse,
)
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, InputTypeError, SummaryError
from ctxcompact.estimators import EstimateMethod
from ctxcompact.scans.chat import chat_tokens
from ctxcompact.scans.estimate import estimate_tokens
from ctxcompact.scans.overflow import Limits
from ctxcompact.scans.view import COMPACTION_QUESTION

Source = Literal["model", "digest", "truncation"]
Message = Mapping[str, Any]


@dataclass(frozen=True)
class RequestCut:
    """How a summary request was cut to fit the summarizer's window."""

    #: Input tokens the request may take: the window less the answer's tokens.
    window: int
    #: Estimated tokens of the request as built, and as sent.
    tokens_before: int
    tokens_sent: int
    #: Messages cut to their head and tail (tool outputs first).
    outputs_cut: int = 0
    #: The oldest messages left out (the first request and the previous summary never are).
    messages_left_out: int = 0

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class SummaryOutcome:
    text: str
    source: Source
    round: int
    #: Why the model's answer was not used (None when it was).
    error: str | None = None
    request: SummaryRequest | None = None
    response: SummaryResponse | None = None
    #: Set when the request sent was cut to the window (None: sent whole).
    cut: RequestCut | None = None


class Summarizer:
    """Builds the summary request, calls the client, and falls back when it fails.

    ``client``: a ``SummaryClient`` and/or ``AsyncSummaryClient`` (None: always
    the fallback). ``model``: the session's model, used unless
    ``config.summary_model`` names a (cheaper) one. ``limits``: the window of
    the model that writes summaries (unset: the session model's, which the
    Compactor or ``compact_messages`` passes); the request is cut to fit it
    (``fit_history``).

    ``config.timeout_s`` bounds the whole call (retries included) on both
    paths; the request carries it and ``config.max_retries`` to the client,
    whose SDK applies them per attempt unless the client was given its own.

    A compaction calls ``summarize`` (or ``asummarize``) with ``history`` and
    the keywords below, always the same way; an override that cannot take
    them fails with ``InputTypeError`` (``flow.py``).
    """

    def __init__(
        self,
        client: SummaryClient | AsyncSummaryClient | None = None,
        config: CompactionConfig | None = None,
        *,
        model: str | None = None,
        limits: Any = None,
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
        self.limits = None if limits is None else Limits.coerce(limits)

    # --- the request -------------------------------------------------------------------

    def build_request(
        self,
        history: Sequence[Message],
        *,
        previous_summary: str | None = None,
        round: int = 1,
        instructions: str | None = None,
        context: Sequence[str] = (),
        limits: Any = None,
        token_ratio: float | None = None,
    ) -> SummaryRequest:
        """The request for ``history``, cut to the window (``self.limits``, else
        ``limits``) when one is known. ``token_ratio``: the provider's tokens
        per estimated token for the model that writes the summary (a
        ``UsageCalibrator`` fit's slope; None: the estimates as they are)."""
        request, _ = self._build(
            history,
            previous_summary=previous_summary,
            round=round,
            instructions=instructions,
            context=context,
            limits=limits,
            token_ratio=token_ratio,
        )
        return request

    def request_window(self, limits: Any = None) -> int | None:
        """Input tokens a summary request may take: the summarizer's window
        (``self.limits``, else ``limits``) less the answer (``summary_max_tokens``,
        at most the output limit) and the safety buffer; None without a window."""
        lim = self._limits(limits)
        if lim is None:
            return None
        answer = self.answer_tokens(limits)
        room = [n for n in (lim.context and lim.context - answer, lim.input) if n]
        return max(0, min(room) - self.config.safety_buffer) if room else None

    def answer_tokens(self, limits: Any = None) -> int:
        """The summary's ``max_tokens``: ``summary_max_tokens``, at most the
        summarizer's output limit (the room ``request_window`` keeps free)."""
        lim = self._limits(limits)
        most = self.config.summary_max_tokens
        return min(most, lim.output or most) if lim is not None else most

    def _limits(self, limits: Any) -> Limits | None:
        return self.limits or (None if limits is None else Limits.coerce(limits))

    def _build(
        self,
        history: Sequence[Message],
        *,
        previous_summary: str | None,
        round: int,
        instructions: str | None,
        context: Sequence[str],
        limits: Any = None,
        token_ratio: float | None = None,
    ) -> tuple[SummaryRequest, RequestCut | None]:
        cfg = self.config
        head: list[str] = []
        if context:
            head.append("Context for these notes:\n" + "\n".join(f"- {c}" for c in context))
        if previous_summary and not any(
            content_text(m) == previous_summary for m in history if m.get("role") == "assistant"
        ):
            head.append(f"Notes of compaction round {round - 1}:\n\n{previous_summary}")
        tail = [cfg.summary_prompt or prompts.SUMMARY_REQUEST]
        if cfg.summary_template == "structured":
            tail.append(prompts.STRUCTURED_TEMPLATE.format(round=round))
        if previous_summary:
            tail.append(prompts.CHAINING_INSTRUCTION.format(round=round, previous=round - 1))
        if instructions:
            tail.append(f"Additional instructions for these notes:\n{instructions}")
        system = cfg.system_prompt or prompts.SYSTEM_PROMPT
        messages = [dict(m) for m in history if m.get("role") != "system"]
        cut = None
        window = self.request_window(limits)
        if window is not None:
            ratio = _check_ratio(token_ratio)
            longest = _cut_note(RequestCut(10**9, 10**9, 10**9, 10**6, 10**6))
            fixed = [{"role": "user", "content": "\n\n".join([*head, longest, *tail])}]
            reserved = self._tokens(fixed) + estimate_tokens(system, cfg.estimate_method)
            # The fit counts estimates: the window in those units (the
            # provider counts ``ratio`` tokens for each estimated one).
            budget = math.floor(window / ratio) - reserved
            messages, cut = fit_history(messages, budget, config=cfg,
                                        previous_summary=previous_summary)  # fmt: skip
            if cut is not None:
                cut = dataclasses.replace(
                    cut, window=window,
                    tokens_before=math.ceil((cut.tokens_before + reserved) * ratio),
                    tokens_sent=math.ceil((cut.tokens_sent + reserved) * ratio),
                )  # fmt: skip
                head.append(_cut_note(cut))
        messages.append({"role": "user", "content": "\n\n".join([*head, *tail])})
        request = SummaryRequest(
            system=system,
            messages=messages,
            model=cfg.summary_model or self.model,
            # what the window was cut for: asking for more could run past it
            max_tokens=self.answer_tokens(limits),
            temperature=cfg.summary_temperature,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
        )
        return request, cut

    def _tokens(self, messages: Sequence[Message]) -> int:
        cfg = self.config
        return chat_tokens(messages, method=cfg.estimate_method,
                                      overhead=cfg.message_overhead)  # fmt: skip

    # --- the call ----------------------------------------------------------------------

    def summarize(
        self,
        history: Sequence[Message],
        *,
        previous_summary: str | None = None,
        round: int = 1,
        instructions: str | None = None,
        context: Sequence[str] = (),
        limits: Any = None,
        token_ratio: float | None = None,
        kept: Sequence[Message] = (),
    ) -> SummaryOutcome:
        """Ask the client for the summary of ``history``; ``limits``: the window
        when the summarizer has none of its own (the session model's);
        ``token_ratio``: as in ``build_request``; ``kept``: the messages of
        ``history`` sent as they are beside the summary (pinned turns), which
        a digest or a truncation does not repeat (``build_digest``)."""
        request, cut = self._build(history, previous_summary=previous_summary, round=round,
                                   instructions=instructions, context=context,
                                   limits=limits, token_ratio=token_ratio)  # fmt: skip
        client = self.client
        if client is None:
            return self._chosen_digest(history, request, previous_summary, round, kept)
        if not isinstance(client, SummaryClient):
            raise ConfigError("this client is async-only: use asummarize()")
        timeout = self.config.timeout_s
        try:
            response = _call_with_deadline(client.complete, request, timeout)
        except Exception as e:  # any failure of the call takes the fallback chain
            why = _describe(e, timeout)
            outcome = self._fallback(history, request, previous_summary, round, why, e, kept)
        else:
            outcome = self._accept(history, request, response, previous_summary, round, kept)
        return dataclasses.replace(outcome, cut=cut)

    async def asummarize(
        self,
        history: Sequence[Message],
        *,
        previous_summary: str | None = None,
        round: int = 1,
        instructions: str | None = None,
        context: Sequence[str] = (),
        limits: Any = None,
        token_ratio: float | None = None,
        kept: Sequence[Message] = (),
    ) -> SummaryOutcome:
        request, cut = await asyncio.to_thread(
            self._build, history, previous_summary=previous_summary, round=round,
            instructions=instructions, context=context, limits=limits, token_ratio=token_ratio,
        )  # fmt: skip
        client = self.client
        if client is None:
            return self._chosen_digest(history, request, previous_summary, round, kept)
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
            outcome = self._fallback(history, request, previous_summary, round, why, e, kept)
        else:
            outcome = self._accept(history, request, response, previous_summary, round, kept)
        return dataclasses.replace(outcome, cut=cut)

    def _accept(
        self,
        history: Sequence[Message],
        request: SummaryRequest,
        response: SummaryResponse,
        previous_summary: str | None,
        round: int,
        kept: Sequence[Message] = (),
    ) -> SummaryOutcome:
        if response.finish == "length":
            why = f"the summary was cut off at max_tokens={request.max_tokens}"
            return self._fallback(history, request, previous_summary, round, why, None, kept)
        if not response.text.strip():
            return self._fallback(history, request, previous_summary, round, "empty summary",
                                  None, kept)  # fmt: skip
        return SummaryOutcome(response.text, "model", round, None, request, response)

    def _chosen_digest(
        self,
        history: Sequence[Message],
        request: SummaryRequest,
        previous_summary: str | None,
        round: int,
        kept: Sequence[Message] = (),
    ) -> SummaryOutcome:
        """No model was given: the digest is the summary asked for, not a
        fallback (no error, no ``compaction.fallback`` event)."""
        digest = build_digest(history, previous_summary=previous_summary, round=round,
                              chosen=True, kept=kept)  # fmt: skip
        return SummaryOutcome(digest, "digest", round, None, request)

    def _fallback(
        self,
        history: Sequence[Message],
        request: SummaryRequest,
        previous_summary: str | None,
        round: int,
        why: str,
        cause: BaseException | None = None,
        kept: Sequence[Message] = (),
    ) -> SummaryOutcome:
        policy = self.config.fallback
        if policy == "raise":
            raise SummaryError(f"summary generation failed: {why}") from cause
        if policy == "digest":
            digest = build_digest(history, previous_summary=previous_summary, round=round,
                                  kept=kept)  # fmt: skip
            return SummaryOutcome(digest, "digest", round, why, request)
        # the turns sent as they are beside the summary are not repeated in it
        text = truncate_history(
            [m for m in history if m not in kept], self.config.summary_max_tokens,
            method=self.config.estimate_method,
        )  # fmt: skip
        return SummaryOutcome(text, "truncation", round, why, request)


def _check_ratio(ratio: float | None) -> float:
    if ratio is None:
        return 1.0
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio > 0 \
            or math.isinf(ratio):  # fmt: skip
        raise ConfigError(f"token_ratio must be a positive number, got {ratio!r}",
                          column="token_ratio")  # fmt: skip
    return float(ratio)


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


# --- fitting the request to the window ------------------------------------------------


def _cut_note(cut: RequestCut) -> str:
    said = []
    if cut.messages_left_out:
        said.append(f"the {cut.messages_left_out} oldest messages after the first request "
                    "were left out (earlier history elided)")  # fmt: skip
    if cut.outputs_cut:
        said.append(f"{cut.outputs_cut} long messages were shortened to their head and tail "
                    "(the marker in each says how much was cut)")  # fmt: skip
    return (f"Note: this history was cut to fit the window ({cut.tokens_before} tokens, about "
            f"{cut.window} fit): " + "; ".join(said) + ".")  # fmt: skip


def _units(messages: Sequence[Message]) -> list[list[int]]:
    """Indices grouped so a tool call and its results go together."""
    units: list[list[int]] = []
    for i, m in enumerate(messages):
        if m.get("role") == "tool" and units:
            units[-1].append(i)
        else:
            units.append([i])
    return units


def _shorten(message: dict[str, Any], tokens: int) -> dict[str, Any] | None:
    """``message`` with its text cut to its head and tail (about ``tokens``), or
    None when it has no such text to cut (blocks, or already short)."""
    text = message.get("content")
    if not isinstance(text, str):
        return None
    cut = _core.truncate_output(text, max(1, tokens))
    return None if cut == text else {**message, "content": cut}


def _cap(sizes: list[int], room: int) -> int:
    """The largest per-output size (at least 64) at which ``sizes`` fit in
    ``room``, the biggest outputs cut first (a few percent kept for markers)."""
    room = int(room * 0.95)
    low, high = 64, max(sizes, default=64)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(n, mid) for n in sizes) <= room:
            low = mid
        else:
            high = mid - 1
    return low


def fit_history(
    messages: Sequence[Message],
    budget: int,
    *,
    config: CompactionConfig | None = None,
    previous_summary: str | None = None,
) -> tuple[list[dict[str, Any]], RequestCut | None]:
    """``messages`` cut to about ``budget`` tokens for the summary request.

    First the biggest tool outputs are cut to their head and tail (the
    ``truncate_output`` cut: a marker says how many characters went), all to
    one size, as much as the rest leaves room for; if that is not enough,
    the oldest messages are left out, a tool call with its results (the
    agent's steps before the user's later requests and system messages),
    never the first user request or the previous summary; last, any message
    still over the budget is cut the same way.
    Returns the messages and what was cut (None: they fit as they were).
    """
    cfg = config or CompactionConfig()

    def tokens(ms: Sequence[Message]) -> int:
        return chat_tokens(ms, method=cfg.estimate_method,
                                      overhead=cfg.message_overhead)  # fmt: skip

    out = [dict(m) for m in messages]
    before = tokens(out)
    if before <= budget:
        return out, None
    budget = max(budget, 0)
    sizes = {i: tokens([m]) for i, m in enumerate(out) if m.get("role") == "tool"}
    cap = _cap(list(sizes.values()), budget - (before - sum(sizes.values())))
    shortened: set[int] = set()
    for i, size in sizes.items():
        if size > cap:
            cut = _shorten(out[i], cap)
            if cut is not None:
                out[i] = cut
                shortened.add(i)
    kept = list(range(len(out)))
    left_out = 0
    total = tokens(out)
    if total > budget:
        first = next((i for i, m in enumerate(out) if is_request(m)), None)
        keep = {first} | {
            i for i, m in enumerate(out)
            if previous_summary and m.get("role") == "assistant"
            and content_text(m) == previous_summary
        }  # fmt: skip
        units = [u for u in _units(out)[:-1] if not keep & set(u)]  # the newest step stays
        # Steps first, then the user's later requests and system messages (its
        # directives: "never touch X" must reach the summary while room is left).
        said = {i for i, m in enumerate(out) if is_request(m) or m.get("role") == "system"}
        dropped: set[int] = set()
        for unit in [u for u in units if not said & set(u)] + [u for u in units if said & set(u)]:
            if total <= budget:
                break
            dropped.update(unit)
            total -= tokens([out[i] for i in unit])
        kept = [i for i in kept if i not in dropped]
        left_out = len(dropped)
    if total > budget:
        # A request or a summary over the window alone: its head and tail.
        each = max(64, budget // max(1, len(kept)))
        for i in kept:
            if tokens([out[i]]) > each:
                cut = _shorten(out[i], each)
                if cut is not None:
                    out[i] = cut
                    shortened.add(i)
    sent = [out[i] for i in kept]
    return sent, RequestCut(
        window=budget, tokens_before=before, tokens_sent=tokens(sent),
        outputs_cut=len(shortened & set(kept)), messages_left_out=left_out,
    )  # fmt: skip


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


#: The digest's Original Task when the task is a pinned turn, sent as it is
#: before the summary: named, not copied a second time.
PINNED_TASK = "(the first user request: pinned, sent as it is before this summary)"


def build_digest(
    history: Sequence[Message],
    *,
    previous_summary: str | None = None,
    round: int = 1,
    chosen: bool = False,
    kept: Sequence[Message] = (),
) -> str:
    """A structured summary built from the history alone, deterministically;
    ``chosen``: no model was given (else a model call failed). Every section
    is capped (the task at ``TASK_CHARS``, saying where it was cut).
    ``kept``: the messages sent as they are beside the summary (pinned
    turns): a request among them is not repeated, so a pinned task is sent
    once (the Original Task points to it, Latest User Requests leave it out)."""
    requests = [m for m in history if is_request(m)]
    sent = {content_text(m) for m in kept if is_request(m)}
    if requests and content_text(requests[0]) in sent:
        task = PINNED_TASK  # (a previous summary's task section would copy it too)
    elif previous_summary:
        task = _clip_task(_section(previous_summary, "Original Task") or previous_summary)
    else:
        task = content_text(requests[0]) if requests else "(no user request in the history)"
        task = _clip_task(task)
    files = _capped([f"- {f}" for f in _files(history)], MAX_FILES, "files")
    errors = _capped(_errors(history), MAX_ERRORS, "errors")
    latest = [f"- {_clip(content_text(m), 500)}" for m in requests
              if content_text(m) not in sent][-3:]  # fmt: skip
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


__all__ = [
    "RequestCut",
    "Summarizer",
    "SummaryOutcome",
    "build_digest",
    "fit_history",
    "truncate_history",
]
