"""What every framework integration does, over OpenAI chat dicts.

A framework's history (LangChain messages, pydantic-ai ``ModelMessage``s,
Agents SDK items) is converted to chat dicts, and this runs the chat-list
family on it: the pairing check (or its repair, reported), the policy's
masking for what the model sees at every step, and a split-point summary
(``compact_messages`` with ``mask_first``) when even the masked history
fills the window's threshold. Tool calls and their results are never split;
the records, events, hooks and metrics are the live lifecycle's. The fates
(which results are cleared or cut) and every count come from the engine: the
chat list is read by the core's chat mapper and run through prune and the
per-message estimates (``scans/chatrows.py``), so a history gets the fates
and counts of the same history stored as a session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import ctxcompact.live.events as ev
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, InputTypeError, MissingToolResultError
from ctxcompact.live.split import (
    SplitResult,
    acompact_messages,
    compact_messages,
    leading_system,
    should_compact,
)
from ctxcompact.live.summary import Summarizer
from ctxcompact.policy import Policy
from ctxcompact.scans.masking import mask_chat_messages
from ctxcompact.scans.overflow import Limits, ModelRegistry
from ctxcompact.scans.repair import RepairReport, repair_chat_messages

Chat = list[dict[str, Any]]


def check_pairs(chat: Sequence[Mapping[str, Any]]) -> None:
    """Raise for a history no model API accepts: a result before (or without)
    its call, a call no later result answers. Says which message and call."""
    from ctxcompact.scans.chat import answered_calls, use_blocks, validate_chat_messages

    validate_chat_messages(chat)  # orphan results, unknown roles, calls without ids
    answered = {cid for m in chat for cid in answered_calls(m)}
    for i, m in enumerate(chat):
        made = [(str(c["id"]), "tool_calls") for c in m.get("tool_calls") or []]
        made += [(cid, "content") for cid in use_blocks(m)]  # an Anthropic turn's tool_use
        for cid, column in made:
            if cid not in answered:
                raise MissingToolResultError(
                    f"message {i} calls tool {cid!r}, and no later message holds its "
                    "result (pass repair=True to add an interrupted-tool result)",
                    column=column, row=i,
                )  # fmt: skip


@dataclass
class ChatCompaction:
    """The policy, window and summarizer of one integration instance.

    ``context`` (the model's window, tokens) or ``model`` (a name the limits
    registry knows) sets the window; ``output`` the output reserve.
    ``repair``: fix unpaired tool calls and results (``repairs`` keeps each
    report) instead of raising ``OrphanedToolResultError`` /
    ``MissingToolResultError``.
    """

    summarizer: Summarizer
    context: int
    output: int = 0
    config: CompactionConfig = field(default_factory=CompactionConfig)
    session_id: str = ""
    repair: bool = False
    hooks: ev.Hooks | None = None
    events: ev.EventBus = field(default_factory=ev.EventBus)
    metrics: ev.Metrics = field(default_factory=ev.Metrics)
    records: list[ev.CompactionRecord] = field(default_factory=list)
    repairs: list[RepairReport] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        summarizer: Summarizer,
        *,
        context: int | None,
        model: str | None,
        output: int | None,
        policy: Policy | str | Mapping[str, Any] | None,
        config: CompactionConfig | None,
        **rest: Any,
    ) -> ChatCompaction:
        cfg = config or summarizer.config
        if policy is not None:
            cfg = cfg.model_copy(update={"policy": Policy.load(policy)})
        # What the model sees is masked at every step, so the summary threshold
        # is checked on the masked history: mask-then-summarize.
        cfg = cfg.model_copy(update={"mask_first": cfg.prune})
        if summarizer.config is not cfg:
            summarizer = Summarizer(summarizer.client, cfg, model=summarizer.model)
        for name, value in (("context", context), ("output", output)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{name} must be a token count (int), got {value!r}",
                                  column=name)  # fmt: skip
        if context is None and model is not None:
            limits = ModelRegistry().get(model)
            context, output = limits.context, output if output is not None else limits.output
        if context is None or context <= 0:
            raise ConfigError("the window is unknown: pass context=<tokens> or model=<a name "
                              "the limits registry knows>", column="context")  # fmt: skip
        usable = Limits(context=context, output=output or 0).usable(cfg) or 0
        if usable - cfg.system_reserve - cfg.safety_buffer <= 0:
            raise ConfigError(
                f"a window of {context} tokens leaves no room for the history after the output "
                f"reserve ({Limits(context=context, output=output or 0).reserve(cfg)}; pass "
                "output=<the model's output limit>) and the config's system_reserve and "
                "safety_buffer", column="context",
            )  # fmt: skip
        return cls(summarizer, context, output or 0, cfg, **rest)

    def prepare(self, chat: Chat) -> Chat:
        """The history checked (or repaired, with the report kept)."""
        if not self.repair:
            check_pairs(chat)
            return chat
        fixed, report = repair_chat_messages(chat)
        if report:
            self.repairs.append(report)
        return fixed

    def view(self, chat: Chat) -> Chat:
        """What the model is sent: the policy's masking (cleared and cut outputs)."""
        if not self.config.prune:
            return chat
        cfg = self.config
        return mask_chat_messages(chat, cfg.policy, method=cfg.estimate_method,
                                  overhead=cfg.message_overhead).messages  # fmt: skip

    def _needed(self, chat: Chat) -> bool:
        # With masking on, compact_messages decides on the masked history itself.
        return self.config.mask_first or should_compact(
            chat, context=self.context, config=self.config, output=self.output
        )

    def _kwargs(self) -> dict[str, Any]:
        return {"context": self.context, "output": self.output, "config": self.config,
                "session_id": self.session_id, "hooks": self.hooks, "events": self.events,
                "metrics": self.metrics}  # fmt: skip

    def _done(self, result: SplitResult) -> SplitResult | None:
        if result.record is None:
            return None
        self.records.append(result.record)
        return result

    def compact(self, chat: Chat) -> SplitResult | None:
        """A summary when the (masked) history is over the threshold, else None."""
        if not self._needed(chat):
            return None
        return self._done(compact_messages(chat, self.summarizer, **self._kwargs()))

    async def acompact(self, chat: Chat) -> SplitResult | None:
        if not self._needed(chat):
            return None
        return self._done(await acompact_messages(chat, self.summarizer, **self._kwargs()))


class Options(TypedDict, total=False):
    """The keyword options every integration's constructor takes: the window
    (``context`` tokens, or ``model``, a name the limits registry knows;
    ``output``, the output reserve), the ``policy`` (a preset name, file,
    dict or ``Policy``; default: the config's), the ``config``, ``repair``
    (see ``ChatCompaction``), and the lifecycle's ``hooks``, ``events`` and
    ``metrics`` (``None``: new ones)."""

    context: int | None
    model: str | None
    output: int | None
    policy: Policy | str | Mapping[str, Any] | None
    config: CompactionConfig | None
    repair: bool
    hooks: ev.Hooks | None
    events: ev.EventBus | None
    metrics: ev.Metrics | None


class SessionOptions(Options, total=False):
    """``Options`` and the ``session_id`` the records and events name."""

    session_id: str


class Integration:
    """What every framework integration exposes: its ``ChatCompaction`` and the
    lifecycle's records, events, metrics and repair reports."""

    compaction: ChatCompaction

    def _start(self, summary_model: Any, options: SessionOptions, client: Any = None) -> None:
        """Build ``compaction`` from the constructor's ``summary_model``
        (``client``: the framework's model wrapped as a ``SummaryClient``) and
        its keyword ``options``."""
        given: dict[str, Any] = dict(options)
        if unknown := sorted(set(given) - set(SessionOptions.__annotations__)):
            raise InputTypeError(f"{type(self).__name__}() got an unexpected keyword argument "
                                 f"{unknown[0]!r}")  # fmt: skip
        for key in ("events", "metrics"):
            if given.get(key) is None:
                given.pop(key, None)
        window = {k: given.pop(k, None) for k in ("context", "model", "output", "policy", "config")}
        summarizer = summarizer_for(summary_model, window["config"], client)
        self.compaction = ChatCompaction.build(summarizer, **window, **given)

    @property
    def records(self) -> list[ev.CompactionRecord]:
        """Every compaction made, oldest first."""
        return self.compaction.records

    @property
    def events(self) -> ev.EventBus:
        return self.compaction.events

    @property
    def metrics(self) -> ev.Metrics:
        return self.compaction.metrics

    @property
    def repairs(self) -> list[RepairReport]:
        """The report of every history that was repaired (``repair=True``)."""
        return self.compaction.repairs


def summarizer_for(model: Any, config: CompactionConfig | None, client: Any = None) -> Summarizer:
    """The compaction agent for an integration's ``summary_model``: a
    ``Summarizer`` as given, else one around ``client`` (the framework's model
    wrapped) or ``model`` itself (a ``SummaryClient``, or ``None``: the digest)."""
    if isinstance(model, Summarizer):
        return model
    return Summarizer(client if client is not None else model, config)


def kept_tail(result: SplitResult) -> int:
    """How many of the input's newest messages the compacted list kept verbatim
    (``[system..., summary, request?, *tail]``: the tail is a suffix of the
    input; ``result.request`` a repeat of the newest user turn, from the head)."""
    out = result.messages
    return len(out) - leading_system(out) - 1 - (result.request is not None)


__all__ = [
    "ChatCompaction",
    "Integration",
    "Options",
    "SessionOptions",
    "check_pairs",
    "kept_tail",
    "summarizer_for",
]
