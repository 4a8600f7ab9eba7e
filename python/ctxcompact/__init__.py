"""ctxcompact: keep LLM agent sessions inside their model's context window.

Token estimates, overflow detection, pruning of old tool outputs and summary
pivots, over one live session or millions of stored ones (Rust core over
Arrow).

The top level holds what most programs use; the rest lives by mechanism:
``ctxcompact.scans`` (estimates, overflow, prune/mark/pivot, the model view),
``ctxcompact.live`` (the lifecycle of a running session), ``ctxcompact.batch``
(Arrow, Parquet, Ray Data), ``ctxcompact.formats`` (transcript formats and the
native reader), ``ctxcompact.clients`` (summary models), ``ctxcompact.models``,
``ctxcompact.tuning`` (replay, retention, grids) and ``ctxcompact.errors``.
"""

from ctxcompact._core import ERROR_CLASSES as _ERROR_CLASSES
from ctxcompact._core import __version__
from ctxcompact.batch import compact_batch, compact_parquet
from ctxcompact.clients.base import AsyncSummaryClient, SummaryClient
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import CompactionError, check_core_classes
from ctxcompact.formats.reader import read_sessions
from ctxcompact.live import (
    CompactionLoop,
    Compactor,
    MemoryStore,
    SQLiteStore,
    Summarizer,
    acompact_messages,
    compact_messages,
)
from ctxcompact.models import Session
from ctxcompact.scans import (
    Limits,
    ModelRegistry,
    check_overflow,
    estimate_messages,
    estimate_tokens,
    filter_pivot,
    mark_pruned,
    plan,
    prune,
    to_model_messages,
)
from ctxcompact.transcript import Transcript
from ctxcompact.tuning import replay, tune

__all__ = [
    "AsyncSummaryClient",
    "CompactionConfig",
    "CompactionError",
    "CompactionLoop",
    "Compactor",
    "Limits",
    "MemoryStore",
    "ModelRegistry",
    "SQLiteStore",
    "Session",
    "Summarizer",
    "SummaryClient",
    "Transcript",
    "__version__",
    "acompact_messages",
    "check_overflow",
    "compact_batch",
    "compact_messages",
    "compact_parquet",
    "estimate_messages",
    "estimate_tokens",
    "filter_pivot",
    "mark_pruned",
    "plan",
    "prune",
    "read_sessions",
    "replay",
    "to_model_messages",
    "tune",
]

# A core error class missing here fails the import, not the first error.
check_core_classes(_ERROR_CLASSES)
