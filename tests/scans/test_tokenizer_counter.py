"""TokenizerCounter counts transcripts' text as ordinary text (tiktoken, tokenizers),
with vocabularies built here: nothing is downloaded."""

from __future__ import annotations

import pytest
from ctxcompact.errors import ConfigError, InputTypeError
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


@pytest.mark.parametrize("name", ["o200k", "cl100k"])
def test_a_family_name_is_refused_and_pointed_to_count_tokens(name: str) -> None:
    # A str has an encode method: the text was taken as a codec name, c("utf-8") == 5.
    says = rf"tiktoken Encoding.*got str.*count_tokens\(text, '{name}'\)"
    with pytest.raises(InputTypeError, match=says):
        TokenizerCounter(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("tokenizer", [None, 5, b"o200k", object()])
def test_an_object_without_encode_is_refused(tokenizer: object) -> None:
    with pytest.raises(InputTypeError, match="TokenizerCounter takes a tokenizer object") as err:
        TokenizerCounter(tokenizer)  # type: ignore[arg-type]
    assert err.value.column == "tokenizer"


def test_a_text_that_is_not_a_str_is_an_input_type_error() -> None:
    counter = TokenizerCounter(byte_level_tiktoken())
    for text in (5, None, b"hi"):
        with pytest.raises(InputTypeError, match="TokenizerCounter counts a str, got"):
            counter(text)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="special_tokens must be true or false"):
        TokenizerCounter(byte_level_tiktoken(), special_tokens="yes")  # type: ignore[arg-type]


def test_count_chat_tokens_takes_a_counter_and_the_column_counters_say_what_it_is() -> None:
    import pyarrow as pa
    from ctxcompact.scans import count_chat_tokens, count_tokens, count_tokens_array

    counter = TokenizerCounter(byte_level_tiktoken())
    messages = [{"role": "user", "content": "hello", "name": "dev"}]
    # 3 per message + role + text, 1 + the name, 3 priming the reply; one token per byte
    assert count_chat_tokens(messages, counter) == 3 + (3 + 4 + 5) + (1 + 3)
    with pytest.raises(ConfigError, match="takes no vocabulary"):
        count_chat_tokens(messages, counter, vocabulary="x.model")
    for call in (lambda: count_tokens_array(pa.array(["x"]), counter),  # type: ignore[arg-type]
                 lambda: count_tokens("x", counter)):  # type: ignore[arg-type]  # fmt: skip
        with pytest.raises(ConfigError, match="a TokenizerCounter is a per-string callable") as err:
            call()
        assert " at 0x" not in str(err.value)  # no object address
    with pytest.raises(ConfigError, match=r"through TokenizerCounter\(tokenizer\)"):
        count_tokens("x", byte_level_tiktoken())  # type: ignore[arg-type]
