"""TokenizerCounter counts transcripts' text as ordinary text (tiktoken, tokenizers),
with vocabularies built here: nothing is downloaded."""

from __future__ import annotations

import pytest
from ctxcompact.scans.estimate import TokenizerCounter

TEXT = "the run printed <|endoftext|> and stopped"


def byte_level_tiktoken() -> object:
    tiktoken = pytest.importorskip("tiktoken")
    return tiktoken.Encoding(
        name="bytes-only",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={"<|endoftext|>": 256},
    )


def test_tiktoken_counts_a_spelled_special_token_as_text_and_never_raises() -> None:
    enc = byte_level_tiktoken()
    with pytest.raises(ValueError):  # what encode does with it: the defect this fixes
        enc.encode(TEXT)  # type: ignore[attr-defined]
    assert TokenizerCounter(enc)(TEXT) == len(TEXT.encode())  # one token per byte
    # asked for: the spelling is the one special token
    assert TokenizerCounter(enc, special_tokens=True)(TEXT) == len(TEXT.encode()) - 13 + 1


def test_tokenizers_adds_no_bos_unless_asked() -> None:
    tk = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "[BOS]": 1, "the": 2, "run": 3, "stopped": 4}
    tokenizer = tk.Tokenizer(tk.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tk.pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(["[BOS]"])
    tokenizer.post_processor = tk.processors.TemplateProcessing(
        single="[BOS] $A", special_tokens=[("[BOS]", 1)]
    )
    assert TokenizerCounter(tokenizer)("the run stopped") == 3
    assert TokenizerCounter(tokenizer, special_tokens=True)("the run stopped") == 4


def test_any_encode_returning_a_sequence_is_counted() -> None:
    class Words:
        def encode(self, text: str) -> list[str]:
            return text.split()

    assert TokenizerCounter(Words())(TEXT) == 6
