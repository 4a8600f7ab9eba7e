"""Live sessions: the compaction lifecycle around one agent run.

``Compactor`` (overflow checks, queued compactions, summaries, hooks, events,
the store) and ``CompactionLoop`` (one call per agent step) over a
``SessionStore``; ``compact_messages`` for plain chat-message lists; the
converters from SDK replies to the assistant messages a step records.
"""

from ctxcompact.live.calibration import UsageCalibrator
from ctxcompact.live.compactor import Compactor
from ctxcompact.live.events import (
    CompactionRecord,
    EventBus,
    Hooks,
    Metrics,
    PostCompactEvent,
    PreCompactEvent,
)
from ctxcompact.live.loop import (
    CallCount,
    CompactionLoop,
    StepDecision,
    context_stop,
    is_context_stop,
)
from ctxcompact.live.postgres import PostgresStore
from ctxcompact.live.replies import (
    from_anthropic_message,
    from_openai_chat,
    from_openai_response,
    run_tools,
)
from ctxcompact.live.split import (
    SplitResult,
    acompact_messages,
    compact_messages,
    select_split,
    should_compact,
)
from ctxcompact.live.store import Commit, MemoryStore, SessionStore, SQLiteStore
from ctxcompact.live.summary import Summarizer, SummaryOutcome, build_digest

__all__ = [
    "CallCount",
    "Commit",
    "CompactionLoop",
    "CompactionRecord",
    "Compactor",
    "EventBus",
    "Hooks",
    "MemoryStore",
    "Metrics",
    "PostCompactEvent",
    "PostgresStore",
    "PreCompactEvent",
    "SQLiteStore",
    "SessionStore",
    "SplitResult",
    "StepDecision",
    "Summarizer",
    "SummaryOutcome",
    "UsageCalibrator",
    "acompact_messages",
    "build_digest",
    "compact_messages",
    "context_stop",
    "from_anthropic_message",
    "from_openai_chat",
    "from_openai_response",
    "is_context_stop",
    "run_tools",
    "select_split",
    "should_compact",
]
