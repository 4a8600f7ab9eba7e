"""Token estimates: byte-level heuristics in Rust, exact counts from a tokenizer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

import ctxcompact._core as _core
from ctxcompact.errors import ColumnTypeError, ConfigError, InputTypeError
from ctxcompact.estimators import FAMILIES, OPENAI_REPLY_PRIMING
from ctxcompact.estimators import EstimateMethod as EstimateMethod  # re-exported
from ctxcompact.scans.content import (
    IMAGE_TOKENS,
    call_texts,
    check_chat_messages,
    content_text,
    split_images,
    tool_block_texts,
)
from ctxcompact.scans.vocabularies import ExactTokenizer as ExactTokenizer  # re-exported
from ctxcompact.scans.vocabularies import core_name


def estimate_tokens(text: str, method: EstimateMethod = "opencode") -> int:
    """Estimated tokens of ``text``.

    ``opencode``: ``round(utf16_length / 4)`` rounding half up, as OpenCode's
    JavaScript computes it. ``ceil-bytes``: ``ceil(utf8_bytes / 4)``. A family
    (``o200k``, ``cl100k``, ``llama3``, ``qwen``, ``tekken``, ``deepseek``):
    that tokenizer's fitted byte-bigram estimate, ``<family>-conservative``
    the same scaled to rarely under-count (docs/estimators.md).

    A lone surrogate (possible in a Python ``str`` decoded from JSON, never in
    UTF-8 or Arrow) counts as one UTF-16 unit, as in JavaScript, as three
    bytes (its WTF-8 form) for ``ceil-bytes``, and as ``?`` for a family.
    """
    if not isinstance(text, str):
        raise InputTypeError(f"estimate_tokens takes a str, got {type(text).__name__}")
    check_method(method)
    try:
        return _core.estimate_tokens(text, method)
    except UnicodeEncodeError:
        if method == "opencode":
            units = len(text.encode("utf-16-le", "surrogatepass")) // 2
            return (units + 2) // 4  # floor(units / 4 + 0.5)
        if method == "ceil-bytes":
            return -(-len(text.encode("utf-8", "surrogatepass")) // 4)
        return _core.estimate_tokens(text.encode("utf-8", "replace").decode("utf-8"), method)


def check_method(method: object) -> None:
    """ConfigError for a ``method`` that is not a name (the core names unknown names)."""
    if not isinstance(method, str):
        raise ConfigError(
            f'method takes an estimate method\'s name: "opencode", "ceil-bytes", or a '
            f'tokenizer family ({", ".join(FAMILIES)}), optionally with "-conservative"; '
            f"got {type(method).__name__}",
            column="method",
        )


def check_threads(threads: int | None) -> int | None:
    """``threads=None`` = one per core; otherwise a positive int (ConfigError if not)."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"threads must be a positive integer or None, got {threads!r}")
    return threads


def check_arrow(values: Any, fn: str) -> None:
    """``InputTypeError`` unless ``values`` exports an Arrow array or stream:
    a list, a str, bytes or a numpy array (a buffer, which the core's Arrow
    import would refuse with a bare ``ValueError``) is not."""
    if hasattr(values, "__arrow_c_array__") or hasattr(values, "__arrow_c_stream__"):
        return
    raise InputTypeError(
        f"{fn} takes an Arrow string array (e.g. pyarrow.array(values)), "
        f"got {type(values).__name__}"
    )


def estimate_tokens_array(
    values: Any, method: EstimateMethod = "opencode", *, threads: int | None = None
) -> pa.Array | pa.ChunkedArray:
    """Estimates of every string of an Arrow string array (int64; nulls stay null).

    ``values`` is anything exporting the Arrow PyCapsule interface: a pyarrow
    (chunked) array, a polars Series, ... with utf8, large_utf8, utf8_view or
    dictionary strings. A pyarrow ``ChunkedArray`` gives a chunked result, anything else
    one array (no copy when it arrived in one chunk). The GIL is released while counting.
    """
    check_arrow(values, "estimate_tokens_array")
    check_method(method)
    result = pa.chunked_array(_core.estimate_tokens_array(values, method, check_threads(threads)))
    if isinstance(values, pa.ChunkedArray):
        return result
    return result.chunk(0) if result.num_chunks == 1 else result.combine_chunks()


#: OpenAI's chat accounting: every message adds 3 tokens (its role and
#: separators), a ``name`` 1 more, and the reply is primed with 3.
_PER_MESSAGE, _PER_NAME, _REPLY_PRIMING = 3, 1, OPENAI_REPLY_PRIMING


def count_tokens(
    text: str, tokenizer: ExactTokenizer = "o200k", *, vocabulary: str | Path | None = None
) -> int:
    """Exact tokens of ``text`` (tiktoken's ``encode_ordinary`` length: special
    tokens' spellings are text, nothing is added).

    ``o200k`` and ``cl100k`` are built into the core. ``llama3``, ``qwen``,
    ``tekken`` and ``deepseek`` are read from ``vocabulary`` (their tokenizer
    file) or from the registry package that ships it (``scans.vocabularies``);
    nothing is downloaded. A file that is not the family's (another number of
    tokens: cut short, or another family's) is a ``ConfigError``. A lone
    surrogate (possible in a ``str`` decoded from JSON) is counted as U+FFFD,
    as tiktoken's ``encode`` counts it.

    ``tokenizer`` is a family name; for any other tokenizer object, call a
    ``TokenizerCounter`` on the text.
    """
    if not isinstance(text, str):
        raise InputTypeError(f"count_tokens takes a str, got {type(text).__name__}")
    return _exact(text, core_name(tokenizer, vocabulary))


def _exact(text: str, name: str) -> int:
    try:
        return _core.count_tokens(text, name)
    except UnicodeEncodeError:  # lone surrogates: replaced, as tiktoken does
        return _core.count_tokens(
            text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), name
        )


def count_tokens_array(
    values: Any,
    tokenizer: ExactTokenizer | TokenizerCounter = "o200k",
    *,
    vocabulary: str | Path | None = None,
    threads: int | None = None,
) -> pa.Array | pa.ChunkedArray:
    """Exact tokens of every string of an Arrow string column (int64; nulls stay
    null), counted in Rust on the thread pool with the GIL released, never a
    Python object per row. Takes what ``estimate_tokens_array`` takes, and the
    tokenizers ``count_tokens`` takes.

    ``tokenizer`` may also be a ``TokenizerCounter``, to count each string
    with another tokenizer: in Python, one call per string (a dictionary
    column's values once each), ``threads`` unused; the result is the same
    int64 array (chunked for a ``ChunkedArray``)."""
    check_arrow(values, "count_tokens_array")
    if isinstance(tokenizer, TokenizerCounter):
        if vocabulary is not None:
            raise ConfigError("a TokenizerCounter takes no vocabulary file: its tokenizer has one",
                              column="vocabulary")  # fmt: skip
        check_threads(threads)
        return _count_with(values, tokenizer)
    name = core_name(tokenizer, vocabulary)
    result = pa.chunked_array(_core.count_tokens_array(values, name, check_threads(threads)))
    if isinstance(values, pa.ChunkedArray):
        return result
    return result.chunk(0) if result.num_chunks == 1 else result.combine_chunks()


def _count_with(values: Any, counter: TokenizerCounter) -> pa.Array | pa.ChunkedArray:
    """``count_tokens_array`` with a ``TokenizerCounter``: each string counted
    by ``counter`` in Python (nulls stay null), as int64."""
    chunked = isinstance(values, pa.ChunkedArray)
    try:
        if chunked or isinstance(values, pa.Array):
            column = values
        elif hasattr(values, "__arrow_c_stream__"):  # a polars Series, ...
            column = pa.chunked_array(values)
        else:
            column = pa.array(values)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise InputTypeError(f"count_tokens_array takes an Arrow string array (e.g. "
                             f"pyarrow.array(values)), got {type(values).__name__} "
                             f"({e})") from None  # fmt: skip
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind)):  # fmt: skip
        raise ColumnTypeError(f'column "values" has type {column.type}; expected utf8, '
                              "large_utf8, utf8_view or a dictionary of them",
                              column="values")  # fmt: skip

    def count(chunk: pa.Array) -> pa.Array:
        if isinstance(chunk, pa.DictionaryArray):  # each distinct string once
            return count(chunk.dictionary).take(chunk.indices)
        return pa.array([None if s is None else counter(s) for s in chunk.to_pylist()],
                        pa.int64())  # fmt: skip

    if isinstance(column, pa.ChunkedArray):
        result = pa.chunked_array([count(c) for c in column.chunks], pa.int64())
        if chunked:
            return result
        return result.chunk(0) if result.num_chunks == 1 else result.combine_chunks()
    return count(column)


def count_chat_tokens(
    messages: Sequence[Mapping[str, Any]],
    tokenizer: ExactTokenizer | TokenizerCounter = "o200k",
    *,
    vocabulary: str | Path | None = None,
) -> int:
    """Exact prompt tokens of OpenAI chat messages as OpenAI bills them: each
    message's role and text (tool calls' names and arguments, a custom call's
    input, a tool result's text; an Anthropic ``tool_use`` / ``tool_result``
    block as the same call or result) plus 3 per message, 1 per ``name``, and
    3 priming the reply. (Other families' chat templates frame messages
    differently: this is OpenAI's.)

    ``tokenizer`` is a family name, or a ``TokenizerCounter`` to count each
    text with another tokenizer (in Python, one call per text)."""
    counter: Callable[[str], int]
    if isinstance(tokenizer, TokenizerCounter):
        if vocabulary is not None:
            raise ConfigError("a TokenizerCounter takes no vocabulary file: its tokenizer has one",
                              column="vocabulary")  # fmt: skip
        counter = tokenizer
    else:
        counter = partial(_exact, name=core_name(tokenizer, vocabulary))

    total = _REPLY_PRIMING
    for m in check_chat_messages(messages):
        content, images = split_images(m.get("content"))
        # Anthropic tool_use / tool_result blocks: as their chat twins (a call's
        # name and arguments, a result's text)
        tools, tool_images = tool_block_texts(m.get("content"))
        total += (images + tool_images) * IMAGE_TOKENS  # billed by size, not by their URL
        parts = [str(m.get("role") or ""), content_text(content), *tools]
        for call in m.get("tool_calls") or []:
            parts += call_texts(call)
        total += _PER_MESSAGE + sum(counter(p) for p in parts if p)
        if m.get("name"):
            total += _PER_NAME + counter(str(m["name"]))
    return total


class Tokenizer(Protocol):
    """Anything with ``encode(text)`` returning a sequence (tiktoken, tokenizers)."""

    def encode(self, text: str, /) -> Any: ...


class TokenizerCounter:
    """Exact counts from a local tokenizer: tiktoken ``Encoding`` or HF ``tokenizers.Tokenizer``.

    Nothing is downloaded: load the vocabulary from a file you have
    (``tokenizers.Tokenizer.from_file(path)``, ``tiktoken.Encoding(...)``).

    Text is counted as ordinary text and nothing is added: with tiktoken a
    special token's spelling in it (``<|endoftext|>`` appears in real
    transcripts) counts as the tokens of its characters and never raises;
    with ``tokenizers`` no BOS/EOS is added (its added tokens still match as
    the tokenizer defines them). ``special_tokens=True`` counts spellings as
    the special tokens (tiktoken) and adds the post-processor's BOS/EOS
    (``tokenizers``).

    It is a per-string ``str -> int`` callable, counted in Python:
    ``count_chat_tokens`` takes one; the columnar counters, budgets and the
    ``Compactor`` take a family name (``count_tokens(text, "o200k")``) only.
    A family name here is an ``InputTypeError``.
    """

    def __init__(self, tokenizer: Tokenizer, *, special_tokens: bool = False) -> None:
        encode = getattr(tokenizer, "encode", None)
        if isinstance(tokenizer, str | bytes) or not callable(encode):
            hint = ""
            if isinstance(tokenizer, str):
                hint = (f" (a family name goes to count_tokens(text, {tokenizer!r}) and "
                        f"the other counters)")  # fmt: skip
            raise InputTypeError(
                "TokenizerCounter takes a tokenizer object: a tiktoken Encoding, a "
                "tokenizers.Tokenizer, or anything with encode(text) returning the tokens; "
                f"got {type(tokenizer).__name__}{hint}",
                column="tokenizer",
            )
        if not isinstance(special_tokens, bool):
            raise ConfigError(f"special_tokens must be true or false, got {special_tokens!r}",
                              column="special_tokens")  # fmt: skip
        self._tokenizer = tokenizer
        self.special_tokens = special_tokens

    def __repr__(self) -> str:
        return f"TokenizerCounter({type(self._tokenizer).__name__})"

    def __call__(self, text: str) -> int:
        if not isinstance(text, str):
            raise InputTypeError(f"TokenizerCounter counts a str, got {type(text).__name__}")
        tok: Any = self._tokenizer
        if hasattr(tok, "encode_ordinary"):  # tiktoken
            if self.special_tokens:
                return len(tok.encode(text, allowed_special="all"))
            return len(tok.encode_ordinary(text))
        if hasattr(tok, "encode_batch"):  # tokenizers: the Encoding's ids
            return len(tok.encode(text, add_special_tokens=self.special_tokens).ids)
        encoded = tok.encode(text)
        return len(getattr(encoded, "ids", encoded))
