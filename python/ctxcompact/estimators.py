"""The names of the token estimates (no imports: config and scans both read them)."""

from __future__ import annotations

from typing import Literal, get_args

#: ``opencode`` (the default: OpenCode's ``round(utf16_length / 4)``),
#: ``ceil-bytes``, or a tokenizer family's fitted byte-bigram estimate
#: (docs/estimators.md), optionally ``-conservative`` (rarely under-counts).
EstimateMethod = Literal[
    "opencode",
    "ceil-bytes",
    "o200k",
    "cl100k",
    "llama3",
    "qwen",
    "tekken",
    "deepseek",
    "o200k-conservative",
    "cl100k-conservative",
    "llama3-conservative",
    "qwen-conservative",
    "tekken-conservative",
    "deepseek-conservative",
]

#: Tokenizer families with a fitted estimator (``method="<family>"``).
FAMILIES = ("o200k", "cl100k", "llama3", "qwen", "tekken", "deepseek")

#: Every estimate method, in the order above.
METHODS: tuple[str, ...] = get_args(EstimateMethod)

__all__ = ["FAMILIES", "METHODS", "EstimateMethod"]
