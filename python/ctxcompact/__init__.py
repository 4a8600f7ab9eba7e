"""ctxcompact: keep LLM agent sessions inside their model's context window.

Token estimates, overflow detection, pruning of old tool outputs and summary
pivots, over one live session or millions of stored ones (Rust core over
Arrow).
"""

from ctxcompact._core import ERROR_CLASSES as _ERROR_CLASSES
from ctxcompact._core import __version__
from ctxcompact.batch import compact_batch
from ctxcompact.chat import (
    estimate_chat_messages,
    prune_tool_results,
    validate_chat_messages,
)
from ctxcompact.clients.base import (
    AsyncSummaryClient,
    SummaryClient,
    SummaryRequest,
    SummaryResponse,
)
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import (
    ColumnTypeError,
    CompactionConflictError,
    CompactionError,
    CompactionLoopError,
    ConfigError,
    DatasetError,
    DuplicateSessionError,
    FormatError,
    HookError,
    InconsistentMessageError,
    InternalError,
    InvalidUsageError,
    MissingColumnError,
    NonContiguousError,
    NullValueError,
    OrphanedToolResultError,
    SchemaError,
    SessionNotFoundError,
    SummaryClientError,
    SummaryError,
    TranscriptError,
    UnknownModelError,
    UnknownValueError,
    check_core_classes,
)
from ctxcompact.estimate import (
    EstimateMethod,
    TokenizerCounter,
    estimate_tokens,
    estimate_tokens_array,
)
from ctxcompact.events import (
    CompactionRecord,
    EventBus,
    Hooks,
    Metrics,
    PostCompactEvent,
    PreCompactEvent,
)
from ctxcompact.history import (
    CLEARED_TOOL_OUTPUT,
    COMPACTION_QUESTION,
    INTERRUPTED_TOOL,
    to_model_messages,
)
from ctxcompact.ingest import IngestResult, RejectedLine, read_jsonl, read_sessions
from ctxcompact.lifecycle import Compactor
from ctxcompact.loop import CompactionLoop, StepDecision, is_context_stop
from ctxcompact.models import (
    AssistantMessage,
    MessageWithParts,
    ModelLimits,
    Part,
    Session,
    SessionInfo,
    TokenUsage,
    ToolState,
    UserMessage,
)
from ctxcompact.overflow import (
    Limits,
    ModelRegistry,
    OverflowOptions,
    OverflowReport,
    TokenBudget,
    Usage,
    check_overflow,
    is_overflow,
)
from ctxcompact.parquet import BatchReport, compact_parquet
from ctxcompact.repair import RepairReport, repair_chat_messages, repair_tool_pairs
from ctxcompact.replies import (
    from_anthropic_message,
    from_openai_chat,
    from_openai_response,
    run_tools,
)
from ctxcompact.scans import (
    MessageEstimates,
    PruneResult,
    estimate_messages,
    filter_pivot,
    mark_pruned,
    pivot_mask,
    prune,
)
from ctxcompact.split import (
    SplitResult,
    acompact_messages,
    compact_messages,
    select_split,
    should_compact,
)
from ctxcompact.store import MemoryStore, SessionStore, SQLiteStore
from ctxcompact.summary import Summarizer, SummaryOutcome, build_digest
from ctxcompact.transcript import Transcript

__all__ = [
    "CLEARED_TOOL_OUTPUT",
    "COMPACTION_QUESTION",
    "INTERRUPTED_TOOL",
    "AssistantMessage",
    "AsyncSummaryClient",
    "BatchReport",
    "ColumnTypeError",
    "CompactionConfig",
    "CompactionConflictError",
    "CompactionError",
    "CompactionLoop",
    "CompactionLoopError",
    "CompactionRecord",
    "Compactor",
    "ConfigError",
    "DatasetError",
    "DuplicateSessionError",
    "EstimateMethod",
    "EventBus",
    "FormatError",
    "HookError",
    "Hooks",
    "InconsistentMessageError",
    "IngestResult",
    "InternalError",
    "InvalidUsageError",
    "Limits",
    "MemoryStore",
    "MessageEstimates",
    "MessageWithParts",
    "Metrics",
    "MissingColumnError",
    "ModelLimits",
    "ModelRegistry",
    "NonContiguousError",
    "NullValueError",
    "OrphanedToolResultError",
    "OverflowOptions",
    "OverflowReport",
    "Part",
    "PostCompactEvent",
    "PreCompactEvent",
    "PruneResult",
    "RejectedLine",
    "RepairReport",
    "SQLiteStore",
    "SchemaError",
    "Session",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionStore",
    "SplitResult",
    "StepDecision",
    "Summarizer",
    "SummaryClient",
    "SummaryClientError",
    "SummaryError",
    "SummaryOutcome",
    "SummaryRequest",
    "SummaryResponse",
    "TokenBudget",
    "TokenUsage",
    "TokenizerCounter",
    "ToolState",
    "Transcript",
    "TranscriptError",
    "UnknownModelError",
    "UnknownValueError",
    "Usage",
    "UserMessage",
    "__version__",
    "acompact_messages",
    "build_digest",
    "check_overflow",
    "compact_batch",
    "compact_messages",
    "compact_parquet",
    "estimate_chat_messages",
    "estimate_messages",
    "estimate_tokens",
    "estimate_tokens_array",
    "filter_pivot",
    "from_anthropic_message",
    "from_openai_chat",
    "from_openai_response",
    "is_context_stop",
    "is_overflow",
    "mark_pruned",
    "pivot_mask",
    "prune",
    "prune_tool_results",
    "read_jsonl",
    "read_sessions",
    "repair_chat_messages",
    "repair_tool_pairs",
    "run_tools",
    "select_split",
    "should_compact",
    "to_model_messages",
    "validate_chat_messages",
]

# A core error class missing here fails the import, not the first error.
check_core_classes(_ERROR_CLASSES)
