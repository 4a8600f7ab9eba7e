"""Import paths from before the layout by mechanism (0.1), kept for one release.

Each old path still imports and warns with ``DeprecationWarning`` naming the
new one; CHANGELOG.md lists them. Remove this module in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

#: Old module -> the module that holds its code now.
MOVED_MODULES = {
    "ctxcompact.atomic": "ctxcompact._atomic",
    "ctxcompact.chat": "ctxcompact.scans.chat",
    "ctxcompact.columnar": "ctxcompact.transcript",
    "ctxcompact.estimate": "ctxcompact.scans.estimate",
    "ctxcompact.events": "ctxcompact.live.events",
    "ctxcompact.history": "ctxcompact.scans.view",
    "ctxcompact.ingest": "ctxcompact.formats.reader",
    "ctxcompact.lifecycle": "ctxcompact.live.compactor",
    "ctxcompact.loop": "ctxcompact.live.loop",
    "ctxcompact.overflow": "ctxcompact.scans.overflow",
    "ctxcompact.parquet": "ctxcompact.batch.parquet",
    "ctxcompact.prompts": "ctxcompact.live.prompts",
    "ctxcompact.ray_data": "ctxcompact.batch.ray_data",
    "ctxcompact.reference": "ctxcompact.testing.reference",
    "ctxcompact.repair": "ctxcompact.scans.repair",
    "ctxcompact.replies": "ctxcompact.live.replies",
    "ctxcompact.split": "ctxcompact.live.split",
    "ctxcompact.store": "ctxcompact.live.store",
    "ctxcompact.summary": "ctxcompact.live.summary",
    "ctxcompact.synthetic": "ctxcompact.testing.synthetic",
}

_ERRORS = (
    "ColumnTypeError CompactionConflictError CompactionLoopError ConfigError DatasetError "
    "DuplicateSessionError FormatError HookError InconsistentMessageError InternalError "
    "InvalidUsageError MissingColumnError NonContiguousError NullValueError "
    "OrphanedToolResultError SchemaError SessionNotFoundError SummaryClientError SummaryError "
    "TranscriptError UnknownModelError UnknownValueError"
)
_SCANS = (
    "CLEARED_TOOL_OUTPUT COMPACTION_QUESTION INTERRUPTED_TOOL EstimateMethod MessageEstimates "
    "OverflowOptions OverflowReport PruneResult RepairReport TokenBudget TokenizerCounter Usage "
    "estimate_chat_messages estimate_tokens_array is_overflow pivot_mask prune_tool_results "
    "repair_chat_messages repair_tool_pairs validate_chat_messages"
)
_LIVE = (
    "CompactionRecord EventBus Hooks Metrics PostCompactEvent PreCompactEvent SessionStore "
    "SplitResult StepDecision SummaryOutcome build_digest from_anthropic_message from_openai_chat "
    "from_openai_response is_context_stop run_tools select_split should_compact"
)
#: Names that left the package's top level -> the module that exports them.
MOVED_NAMES = {
    **dict.fromkeys(_ERRORS.split(), "ctxcompact.errors"),
    **dict.fromkeys(_SCANS.split(), "ctxcompact.scans"),
    **dict.fromkeys(_LIVE.split(), "ctxcompact.live"),
    **dict.fromkeys(
        [
            "AssistantMessage",
            "MessageWithParts",
            "ModelLimits",
            "Part",
            "SessionInfo",
            "TokenUsage",
            "ToolState",
            "UserMessage",
        ],
        "ctxcompact.models",
    ),
    **dict.fromkeys(["SummaryRequest", "SummaryResponse"], "ctxcompact.clients"),
    **dict.fromkeys(["IngestResult", "RejectedLine", "read_jsonl"], "ctxcompact.formats"),
    "BatchReport": "ctxcompact.batch",
}


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} moved to {new}; the old path goes away in ctxcompact 0.3",
        DeprecationWarning,
        stacklevel=3,
    )


def moved_name(name: str) -> Any:
    """The object a top-level name that moved refers to, with a warning."""
    home = MOVED_NAMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ctxcompact' has no attribute {name!r}")
    _warn(f"ctxcompact.{name}", f"{home}.{name}")
    return getattr(importlib.import_module(home), name)


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves an old module path as an alias of the module that replaced it."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        _warn(spec.name, new)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module is already executed under its new name."""


def install() -> None:
    if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
        sys.meta_path.append(_MovedModules())
