"""Native core (Rust). Use the typed wrappers in ``ctxcompact`` instead of calling these directly.

Arrow arguments accept any object exporting ``__arrow_c_array__`` or
``__arrow_c_stream__``; Arrow results are pyarrow arrays, chunked arrays and
tables over the core's own buffers (the C Data Interface, no copy either way).
"""

from collections.abc import Sequence
from typing import Any, final

__all__ = [
    "CACHE_BREAK_MIN_TOKENS",
    "CACHE_BREAK_SHARE",
    "CLEARED_TOOL_OUTPUT",
    "COMPACTION_QUESTION",
    "ERROR_CLASSES",
    "FORMATS",
    "IMAGE_TOKENS",
    "INTERRUPTED_TOOL",
    "JsonlStream",
    "__version__",
    "anthropic_body",
    "cache_breaks",
    "calibration_fit",
    "chat_counts",
    "chat_list_json",
    "chat_rows",
    "check_table",
    "cleared_placeholder",
    "compact_batch",
    "count_tokens",
    "count_tokens_array",
    "count_units",
    "counted_column",
    "estimate_messages",
    "estimate_tokens",
    "estimate_tokens_array",
    "estimator_table",
    "ingest_bytes",
    "ingest_jsonl",
    "load_vocabulary",
    "mark_rows",
    "method_name",
    "overflow_check",
    "pivot",
    "pivot_ranges",
    "plan",
    "price_calls",
    "prune",
    "render_chat",
    "replay",
    "replay_resume",
    "retention_compaction",
    "retention_facts",
    "retention_run",
    "sent_messages",
    "session_pivot",
    "session_rows",
    "take_strings",
    "text_hashes",
    "thinking_flags",
    "tool_targets",
    "truncate_output",
    "turn_end",
    "vocabulary_loaded",
]
__version__: str
CLEARED_TOOL_OUTPUT: str
INTERRUPTED_TOOL: str
COMPACTION_QUESTION: str
IMAGE_TOKENS: int
#: The ``ctxcompact.errors`` class names the core's errors are raised as.
ERROR_CLASSES: list[str]
#: A recorded cache read under this share of the prefix a call shares with
#: the previous one is a cache break (``billing::BREAK_SHARE``).
CACHE_BREAK_SHARE: float
#: A shared prefix under this many recorded tokens shows no break.
CACHE_BREAK_MIN_TOKENS: int
#: The formats the native reader knows, in the core's order (one definition).
FORMATS: tuple[str, ...]

def estimate_tokens(text: str, method: str = "opencode") -> int: ...
def estimator_table(family: str) -> bytes: ...
def load_vocabulary(
    name: str, tiktoken: str, split: str | list[str], tokens: int | None = None
) -> int: ...
def vocabulary_loaded(name: str) -> bool: ...
def estimate_tokens_array(
    values: Any, method: str = "opencode", threads: int | None = None
) -> Any: ...
def count_tokens(text: str, tokenizer: str) -> int: ...
def count_units(values: Any, method: str = "opencode", threads: int | None = None) -> Any: ...
def counted_column(method: str) -> tuple[str, str | None] | None: ...
def text_hashes(values: Any, threads: int | None = None) -> Any: ...
def method_name(method: str) -> str: ...
def calibration_fit(
    estimated: list[int], reported: list[int]
) -> tuple[float, float, int, float, float, float, float] | None: ...
def tool_targets(table: Any, threads: int | None = None) -> Any: ...
def count_tokens_array(values: Any, tokenizer: str, threads: int | None = None) -> Any: ...
def overflow_check(
    input: int,
    output: int,
    reasoning: int,
    cache_read: int,
    cache_write: int,
    context: int,
    limit_input: int,
    limit_output: int,
    *,
    auto: bool = True,
    output_token_max: int = 32000,
    reserved: int | None = None,
    reserved_default: bool = False,
    inclusive: bool = False,
    count_cache_write: bool = False,
    clamp_usable: bool = False,
) -> tuple[bool, int, int]: ...
def prune(
    table: Any, policy: dict[str, Any] | None = None, *, threads: int | None = None
) -> tuple[Any, Any, Any, Any, Any]: ...
def pivot(table: Any, *, threads: int | None = None) -> Any: ...
def check_table(table: Any, *, threads: int | None = None) -> None: ...
def plan(
    table: Any,
    policy: dict[str, Any] | None = None,
    *,
    shape: str | None = None,
    output: str = "json",
    threads: int | None = None,
) -> tuple[list[Any], list[Any], list[bytes] | tuple[Any, Any, Any, Any, Any] | None]:
    """A policy's plan (rust/src/plan.rs): (per part: message index, hidden
    code, fate code, pruned now, tokens; per session: first row,
    rows, total, pruned, pruned parts, tokens, visible tokens; the model
    input: None without a shape,
    per session one JSON array (``output="json"``), or the columns session
    index, index, stored message index, role, JSON (``output="arrow"``))."""

def estimate_messages(
    table: Any,
    *,
    method: str = "opencode",
    overhead: int = 4,
    clear_inputs: bool = False,
    truncate_output: int | None = None,
    placeholder: str = "opencode",
    keep_thinking: int = 0,
    threads: int | None = None,
) -> tuple[Any, Any, Any]: ...
def sent_messages(
    table: Any,
    *,
    method: str = "opencode",
    overhead: int = 4,
    clear_inputs: bool = False,
    truncate_output: int | None = None,
    placeholder: str = "opencode",
    keep_thinking: int = 0,
    threads: int | None = None,
) -> tuple[Any, Any, Any, Any]: ...
def cleared_placeholder(
    tool: str, input: str | None, output: str, part_id: str, *, describe: bool = True
) -> str: ...
def truncate_output(output: str, budget: int) -> str: ...
def render_chat(
    table: Any,
    *,
    clear_inputs: bool = False,
    truncate_output: int | None = None,
    placeholder: str = "opencode",
    keep_thinking: int = 0,
    thinking: list[bool] | None = None,
    threads: int | None = None,
    shape: str = "chat",
) -> list[bytes]: ...
def thinking_flags(assistant: Sequence[bool], keep_thinking: int) -> list[bool]: ...
def anthropic_body(chat: bytes) -> bytes: ...
def session_pivot(messages: Sequence[Any]) -> tuple[int, list[int]] | None:
    """A live Session's messages (pydantic objects): None when ids repeat,
    else (the pivot's index, 0 without one; the indices of the messages
    before it that stay: system, pinned)."""

def chat_counts(
    data: bytes, size: int, *, session: str, method: str = "opencode", overhead: int = 4
) -> list[int]: ...
def chat_rows(
    data: bytes,
) -> tuple[Any, list[tuple[int, int, str, str | None, str | None, bytes]], int, int]:
    """A chat list (one ``{"id", "messages"}`` object) read in the core's
    chat-list mode: ``ingest_bytes`` of an ``openai-chat`` line that also
    reads Anthropic content blocks; each result's chat index in its tool
    part's ``result_source["ctxcompact_at"]``."""

def chat_list_json(messages: Any, *, session: str) -> bytes | None:
    """``messages`` (a list of dicts of plain JSON values) as the JSON the
    chat mapper reads: ``{"id": session, "messages": [...]}``, no message's
    own ``id``, each ``tool`` message tagged with its index under
    ``ctxcompact_at``; None when a value is one only ``json.dumps`` writes
    (a subclass, a lone surrogate, a NaN, an object...)."""

def turn_end(messages: Sequence[tuple[str, bool]]) -> int | None: ...
def mark_rows(compacted_at: Any, rows: Any, now_ms: int) -> Any: ...
def take_strings(column: Any, rows: Any) -> Any: ...
def pivot_ranges(table: Any, *, threads: int | None = None) -> tuple[Any, Any]: ...
def ingest_jsonl(
    paths: list[str],
    format: str | list[str],
    on_error: str = "raise",
    threads: int | None = None,
    chunk_bytes: int = 1048576,
    id_bases: list[str | None] | None = None,
) -> tuple[Any, list[tuple[int, int, str, str | None, str | None, bytes]], int, int]: ...
def ingest_bytes(
    data: bytes, format: str, name: str = "<memory>", on_error: str = "raise"
) -> tuple[Any, list[tuple[int, int, str, str | None, str | None, bytes]], int, int]: ...
def session_rows(data: bytes, *, threads: int | None = None, chunk_bytes: int = 1048576) -> Any:
    """Part rows (an Arrow table, ``tool_target`` as plain strings) of session
    exports, one JSON object per line (``transcript.sessions_to_table``)."""

@final
class JsonlStream:
    """JSONL files read window by window: each step maps about ``window_bytes``
    of whole lines and gives ``(table, rejected, lines, sessions)``."""

    def __new__(
        cls,
        paths: list[str],
        formats: list[str],
        on_error: str = "raise",
        threads: int | None = None,
        chunk_bytes: int = 1048576,
        window_bytes: int = 67108864,
        id_bases: list[str | None] | None = None,
    ) -> JsonlStream: ...
    def __iter__(self) -> JsonlStream: ...
    def __next__(
        self,
    ) -> tuple[Any, list[tuple[int, int, str, str | None, str | None, bytes]], int, int]: ...

def replay(
    table: Any,
    view: dict[str, Any],
    mask: dict[str, Any] | None,
    created: list[int | None],
    output: list[int],
    call: list[str | None],
    *,
    system_tokens: int,
    threshold: int | None,
    available: int,
    usable: int | None,
    threads: int | None = None,
    retention: bool = False,
    system: str | None = None,
) -> list[Any]: ...
def replay_resume(
    table: Any,
    view: dict[str, Any],
    mask: dict[str, Any] | None,
    created: list[int | None],
    output: list[int],
    call: list[str | None],
    heads: list[int],
    hidden: list[list[bool]],
    first_calls: list[int],
    baselines: list[int],
    last_times: list[int | None],
    stalled: list[bool],
    *,
    system_tokens: int,
    threshold: int | None,
    available: int,
    usable: int | None,
    threads: int | None = None,
    system: str | None = None,
    carried: Any | None = None,
) -> list[Any]: ...
def retention_facts(
    messages: str, task_index: int | None = None
) -> list[tuple[str, str, bool, list[str]]]: ...
def retention_compaction(
    before: str, after: str, task: str | None = None
) -> tuple[int, int, list[str]]: ...
def retention_run(steps: list[list[str]]) -> tuple[list[float], list[str]]: ...
def cache_breaks(
    calls: Any,
    recorded: dict[tuple[str, str], tuple[int, int]],
    lifetimes: dict[str, float],
    prefixes: dict[str, int],
    ttl_s: float,
) -> tuple[Any, Any, Any, list[tuple[str, int, int, list[int]]]]: ...
def price_calls(
    calls: Any, rule: tuple[bool, int, int, bool], prices: tuple[float, float, float, float]
) -> tuple[float, float, int, int, int, int, int, int]: ...
def compact_batch(
    table: Any,
    policy: dict[str, Any] | None = None,
    *,
    now_ms: int | None = None,
    threads: int | None = None,
) -> tuple[list[Any], Any, tuple[Any, Any], Any | None]: ...
