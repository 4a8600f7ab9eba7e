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


def test_count_chat_tokens_takes_a_counter_and_count_tokens_says_what_it_is() -> None:
    from ctxcompact.scans import count_chat_tokens, count_tokens

    counter = TokenizerCounter(byte_level_tiktoken())
    messages = [{"role": "user", "content": "hello", "name": "dev"}]
    # 3 per message + role + text, 1 + the name, 3 priming the reply; one token per byte
    assert count_chat_tokens(messages, counter) == 3 + (3 + 4 + 5) + (1 + 3)
    with pytest.raises(ConfigError, match="takes no vocabulary"):
        count_chat_tokens(messages, counter, vocabulary="x.model")
    with pytest.raises(ConfigError, match="a TokenizerCounter is a per-string callable") as err:
        count_tokens("x", counter)  # type: ignore[arg-type]
    assert " at 0x" not in str(err.value)  # no object address
    assert "count_tokens_array take one" in str(err.value)
    with pytest.raises(ConfigError, match=r"through TokenizerCounter\(tokenizer\)"):
        count_tokens("x", byte_level_tiktoken())  # type: ignore[arg-type]


def test_count_tokens_array_takes_a_counter() -> None:
    """Each string counted by the counter, nulls null, int64: an array for an
    array (a dictionary's values once each), chunks for a ChunkedArray."""
    import pyarrow as pa
    from ctxcompact.errors import ColumnTypeError
    from ctxcompact.scans import count_tokens_array

    calls: list[str] = []

    class Words:
        def encode(self, text: str) -> list[str]:
            calls.append(text)
            return text.split()

    counter = TokenizerCounter(Words())
    texts = ["a b c", None, "", TEXT, "a b c"]
    want = [3, None, 0, 6, 3]
    for values in (pa.array(texts), pa.array(texts, pa.large_string()),
                   pa.array(texts, pa.string_view())):  # fmt: skip
        got = count_tokens_array(values, counter)
        assert isinstance(got, pa.Array) and got.type == pa.int64() and got.to_pylist() == want
    calls.clear()
    got = count_tokens_array(pa.array(texts).dictionary_encode(), counter)
    assert got.type == pa.int64() and got.to_pylist() == want
    assert sorted(calls) == sorted(["a b c", "", TEXT])  # each distinct string once
    chunked = pa.chunked_array([texts[:2], texts[2:], []], pa.string())
    got = count_tokens_array(chunked, counter, threads=1)
    assert isinstance(got, pa.ChunkedArray) and got.type == pa.int64()
    assert [c.to_pylist() for c in got.chunks] == [want[:2], want[2:], []]
    polars = pytest.importorskip("polars")
    got = count_tokens_array(polars.Series(texts), counter)
    assert isinstance(got, pa.Array) and got.to_pylist() == want
    # the same result type as a family name gives
    named = count_tokens_array(pa.array(texts), "o200k")
    assert type(named) is type(count_tokens_array(pa.array(texts), counter))
    with pytest.raises(ConfigError, match="takes no vocabulary"):
        count_tokens_array(pa.array(texts), counter, vocabulary="x.model")
    with pytest.raises(ColumnTypeError, match='column "values" has type') as err:
        count_tokens_array(pa.array([1, 2]), counter)
    assert err.value.column == "values"
    with pytest.raises(InputTypeError, match="count_tokens_array takes an Arrow string array"):
        count_tokens_array(["a"], counter)
