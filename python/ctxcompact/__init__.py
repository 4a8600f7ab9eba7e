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
    "ColumnTypeError",
    "CompactionError",
    "ConfigError",
    "EstimateMethod",
    "InconsistentMessageError",
    "InvalidUsageError",
    "Limits",
    "MessageEstimates",
    "MissingColumnError",
    "ModelRegistry",
    "NonContiguousError",
    "NullValueError",
    "OverflowOptions",
    "OverflowReport",
    "PruneResult",
    "SchemaError",
    "TokenBudget",
    "TokenizerCounter",
    "Transcript",
    "TranscriptError",
    "UnknownModelError",
    "UnknownValueError",
    "Usage",
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
]
