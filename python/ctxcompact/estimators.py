"""The names of the token estimates (no imports: config and scans both read them)."""

from __future__ import annotations

from typing import Literal, get_args

#: ``opencode`` (the default: OpenCode's ``round(utf16_length / 4)``),
#: ``ceil-bytes``, or a tokenizer family's fitted byte-bigram estimate
#: (docs/estimators.md), optionally ``-conservative`` (rarely under-counts).
Estimate = Literal[
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

#: Exact counts of a tokenizer family (``scans.vocabularies``), each text
#: counted on its own (a message is its parts' sum): read from the
#: ``output_tokens_<family>`` column where ``Transcript.count`` kept it.
ExactMethod = Literal[
    "o200k-exact",
    "cl100k-exact",
    "llama3-exact",
    "qwen-exact",
    "tekken-exact",
    "deepseek-exact",
]

#: What a scan counts with: an estimate, or a family's exact counts.
EstimateMethod = Literal[Estimate, ExactMethod]

#: Tokenizer families with a fitted estimator (``method="<family>"``).
FAMILIES = ("o200k", "cl100k", "llama3", "qwen", "tekken", "deepseek")

#: Every estimate method, in the order above.
METHODS: tuple[str, ...] = get_args(Estimate)
#: Every exact method.
EXACT_METHODS: tuple[str, ...] = get_args(ExactMethod)


def count_label(method: str) -> str:
    """What a report says it counted with: ``"o200k exact"`` for an exact
    method, ``"estimate <method>"`` for an estimate (``estimate opencode``)."""
    if method in EXACT_METHODS:
        return f"{method.removesuffix('-exact')} exact"
    return f"estimate {method}"


#: The tokens OpenAI adds to every prompt priming the reply
#: (``<|start|>assistant<|message|>``), on top of each message's 3 and its
#: role's token (``message_overhead``'s default 4 is those): OpenAI's
#: cookbook, "How to count tokens with tiktoken" (``num_tokens_from_messages``:
#: ``tokens_per_message = 3``, ``num_tokens += 3``); what
#: ``count_chat_tokens`` adds. Only an exact OpenAI count adds it: another
#: family's chat template frames messages otherwise, and an estimate is not
#: that close.
OPENAI_REPLY_PRIMING = 3
REPLY_PRIMING = {"o200k-exact": OPENAI_REPLY_PRIMING, "cl100k-exact": OPENAI_REPLY_PRIMING}


def reply_priming(method: str) -> int:
    """The tokens each call's prompt adds priming the reply under ``method``."""
    return REPLY_PRIMING.get(method, 0)


__all__ = [
    "EXACT_METHODS",
    "FAMILIES",
    "METHODS",
    "OPENAI_REPLY_PRIMING",
    "REPLY_PRIMING",
    "EstimateMethod",
    "ExactMethod",
    "count_label",
    "reply_priming",
]
