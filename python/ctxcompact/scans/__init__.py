"""Scans: what the Rust core computes over a session's parts.

Token estimates, overflow against a model's limits, the prune / mark / pivot
scans over part rows, the model view (what a model call is sent) and the same
operations over plain chat-message lists. Every ``_core`` call lives here.
"""

from ctxcompact.scans.chat import estimate_chat_messages, validate_chat_messages
from ctxcompact.scans.estimate import (
    EstimateMethod,
    ExactTokenizer,
    TokenizerCounter,
    count_chat_tokens,
    count_tokens,
    count_tokens_array,
    estimate_tokens,
    estimate_tokens_array,
)
from ctxcompact.scans.masking import ChatMask, mask_chat_messages, prune_tool_results
from ctxcompact.scans.overflow import (
    Limits,
    ModelRegistry,
    OverflowOptions,
    OverflowReport,
    TokenBudget,
    Usage,
    check_overflow,
    family_for,
    is_overflow,
)
from ctxcompact.scans.parts import (
    MessageEstimates,
    PruneResult,
    estimate_messages,
    filter_pivot,
    mark_pruned,
    pivot_mask,
    prune,
    verify_output_units,
    with_output_units,
    with_tool_targets,
)
from ctxcompact.scans.plan import Plan, plan
from ctxcompact.scans.repair import RepairReport, repair_chat_messages, repair_tool_pairs
from ctxcompact.scans.view import (
    CLEARED_TOOL_OUTPUT,
    COMPACTION_QUESTION,
    INTERRUPTED_TOOL,
    to_model_messages,
)

__all__ = [
    "CLEARED_TOOL_OUTPUT",
    "COMPACTION_QUESTION",
    "INTERRUPTED_TOOL",
    "ChatMask",
    "EstimateMethod",
    "ExactTokenizer",
    "Limits",
    "MessageEstimates",
    "ModelRegistry",
    "OverflowOptions",
    "OverflowReport",
    "Plan",
    "PruneResult",
    "RepairReport",
    "TokenBudget",
    "TokenizerCounter",
    "Usage",
    "check_overflow",
    "count_chat_tokens",
    "count_tokens",
    "count_tokens_array",
    "estimate_chat_messages",
    "estimate_messages",
    "estimate_tokens",
    "estimate_tokens_array",
    "family_for",
    "filter_pivot",
    "is_overflow",
    "mark_pruned",
    "mask_chat_messages",
    "pivot_mask",
    "plan",
    "prune",
    "prune_tool_results",
    "repair_chat_messages",
    "repair_tool_pairs",
    "to_model_messages",
    "validate_chat_messages",
    "verify_output_units",
    "with_output_units",
    "with_tool_targets",
]
