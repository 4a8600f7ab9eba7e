"""ctxcompact: keep LLM agent sessions inside their model's context window.

Token estimates, overflow detection, pruning of old tool outputs and summary
pivots, over one live session or millions of stored ones (Rust core over
Arrow).
"""

from ctxcompact._core import __version__
from ctxcompact.errors import (
    ColumnTypeError,
    CompactionError,
    ConfigError,
    InconsistentMessageError,
    InternalError,
    InvalidUsageError,
    MissingColumnError,
    NonContiguousError,
    NullValueError,
    SchemaError,
    TranscriptError,
    UnknownModelError,
    UnknownValueError,
)
from ctxcompact.estimate import (
    EstimateMethod,
    TokenizerCounter,
    estimate_tokens,
    estimate_tokens_array,
)
from ctxcompact.history import (
    CLEARED_TOOL_OUTPUT,
    COMPACTION_QUESTION,
    INTERRUPTED_TOOL,
    to_model_messages,
)
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
from ctxcompact.scans import (
    MessageEstimates,
    PruneResult,
    estimate_messages,
    filter_pivot,
    mark_pruned,
    pivot_mask,
    prune,
)
from ctxcompact.transcript import Transcript

__all__ = [
    "CLEARED_TOOL_OUTPUT",
    "COMPACTION_QUESTION",
    "INTERRUPTED_TOOL",
    "AssistantMessage",
    "ColumnTypeError",
    "CompactionError",
    "ConfigError",
    "EstimateMethod",
    "InconsistentMessageError",
    "InternalError",
    "InvalidUsageError",
    "Limits",
    "MessageEstimates",
    "MessageWithParts",
    "MissingColumnError",
    "ModelLimits",
    "ModelRegistry",
    "NonContiguousError",
    "NullValueError",
    "OverflowOptions",
    "OverflowReport",
    "Part",
    "PruneResult",
    "SchemaError",
    "Session",
    "SessionInfo",
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
    "check_overflow",
    "estimate_messages",
    "estimate_tokens",
    "estimate_tokens_array",
    "filter_pivot",
    "is_overflow",
    "mark_pruned",
    "pivot_mask",
    "prune",
    "to_model_messages",
]
