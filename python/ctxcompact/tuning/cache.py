"""What a replay's calls cost under a provider's prompt cache, call by call.

A replay records per call the raw cache opportunity: ``cached_tokens``, the
prompt tokens identical to the previous call's prompt prefix, and
``since_previous_s``, the seconds since that call (null where the run has no
timestamps). Whether the provider would have served that prefix from its
cache, and at what price, is the provider's rule, applied here at pricing
(``CacheRule``, carried by each row of the price table, with its source):

- ``openai``: automatic for prompts of at least 1,024 tokens; the tokens read
  are counted in 128-token steps (rounded down); reads at the model's cached
  input price; no write premium (the rest is billed at the input price).
- ``anthropic``: the runtime puts the breakpoint at the end of each prompt, so
  each call reads the common prefix and writes the rest; nothing is read or
  written below the model's minimum cacheable length; reads at 0.1x input,
  writes at 1.25x (the 5-minute cache) or 2x (``cache="1h"``).
- ``gemini``: implicit caching, at least the model's minimum; reads at the
  cached price, no write premium.
- ``none``: the model has no prompt cache: every prompt token at the input price.
- ``prefix``: your own price without a ``provider``: every common-prefix token
  is read at ``cached_input`` and the rest written at ``cache_write``, with no
  minimum (what replay priced before these rules).

An entry expires when the next call comes after the cache's lifetime (5
minutes; Anthropic's 1-hour cache with ``cache="1h"``, and under the
default for a run that recorded writing 1-hour entries: ``price_calls``'
``lifetimes``); calls without timestamps are taken as within it.
``cache="off"`` prices every prompt token at the input price, as if the
provider had no cache.

A **recorded cache break** (``cache_breaks``) is the runtime invalidating
its cache where the replay would read it: a call whose recorded cache read
is under ``BREAK_SHARE`` of the prefix it shares with the previous call (a
changed system prompt or tools, an expiry the timestamps do not show, a
task notification), within the run's lifetime. It is an event of the run,
not of the policy: every policy's cached prefix at that call (the
baseline's too) is capped where the recorded read reaches.

The reads are an upper bound where a policy rewrites the prompt's middle
(masking an old output): Anthropic reads only up to a breakpoint written
before, and the replay counts the common prefix with the previous prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact import _core
from ctxcompact.errors import ConfigError

if TYPE_CHECKING:  # prices imports this module
    from ctxcompact.tuning.prices import PriceRow

#: The provider kinds a price row's cache rule can name.
PROVIDERS = ("openai", "anthropic", "gemini", "none", "prefix")

#: ``cache=`` / ``--cache``: the 5-minute cache (default), Anthropic's 1-hour
#: cache, or no cache at all.
CACHE_MODES = ("5m", "1h", "off")


@dataclass(frozen=True)
class CacheRule:
    """How a provider bills a prompt's cache reads and writes.

    ``min_tokens``: a prompt (and a cached prefix) shorter than this is neither
    read from nor written to the cache; ``step``: tokens read are counted in
    steps of this many (rounded down); ``writes``: the tokens not read are
    written to the cache at ``cache_write`` (Anthropic; else billed at the
    input price); ``ttl_s``: the cache's lifetime; ``write_1h``: the 1-hour
    cache's write price as a multiple of the input price (``None``: no 1-hour
    cache), with ``ttl_1h_s`` its lifetime; ``source``: where the rule is
    documented."""

    provider: str
    min_tokens: int = 0
    step: int = 1
    writes: bool = False
    ttl_s: float = 300.0
    write_1h: float | None = None
    ttl_1h_s: float = 3600.0
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "min_tokens": self.min_tokens, "step": self.step,
                "writes": self.writes, "ttl_s": self.ttl_s, "write_1h": self.write_1h,
                "source": self.source}  # fmt: skip


OPENAI_CACHING = ("https://openai.com/index/api-prompt-caching/ and https://developers.openai."
                  "com/api/docs/guides/prompt-caching (prompts of 1,024 tokens or more, hits "
                  "in 128-token increments, no fee; entries cleared after 5-10 minutes "
                  "idle)")  # fmt: skip
ANTHROPIC_CACHING = ("https://platform.claude.com/docs/en/build-with-claude/prompt-caching "
                     "(minimum cacheable length per model; 5-minute and 1-hour lifetimes) and "
                     "https://platform.claude.com/docs/en/docs/about-claude/pricing (reads "
                     "0.1x, 5-minute writes 1.25x, 1-hour writes 2x the input price)")  # fmt: skip
GEMINI_CACHING = ("https://ai.google.dev/gemini-api/docs/caching (implicit caching, minimum "
                  "2,048 tokens for Gemini 2.5; its lifetime is not documented: 5 minutes "
                  "assumed)")  # fmt: skip


def openai_rule() -> CacheRule:
    return CacheRule("openai", min_tokens=1_024, step=128, source=OPENAI_CACHING)


def anthropic_rule(min_tokens: int) -> CacheRule:
    return CacheRule("anthropic", min_tokens=min_tokens, writes=True, write_1h=2.0,
                     source=ANTHROPIC_CACHING)  # fmt: skip


#: The rule of a user's own price (``provider`` in the price table; default ``prefix``).
DEFAULT_RULES: dict[str, CacheRule] = {
    "openai": openai_rule(),
    "anthropic": anthropic_rule(1_024),
    "gemini": CacheRule("gemini", min_tokens=2_048, source=GEMINI_CACHING),
    "none": CacheRule("none", source="no prompt cache"),
    "prefix": CacheRule(
        "prefix",
        writes=True,
        source="every common-prefix token read, no minimum (your price names no provider)",
    ),
}


def check_cache(cache: Any) -> str:
    """``cache`` checked: one of ``CACHE_MODES``."""
    if not isinstance(cache, str) or cache not in CACHE_MODES:
        raise ConfigError(f"cache must be one of {', '.join(CACHE_MODES)} (the 5-minute cache, "
                          f"Anthropic's 1-hour cache, or none), got {cache!r}",
                          column="cache")  # fmt: skip
    return cache


@dataclass(frozen=True)
class Sheet:
    """One price sheet: the model named, its price row, the cache mode, and
    the cache's lifetime (``None``: the provider's)."""

    model: str
    row: PriceRow
    cache: str = "5m"
    ttl_s: float | None = None

    def write_price(self) -> float:
        price, rule = self.row.price, self.row.cache
        if self.cache == "1h":
            if rule.write_1h is None:
                raise ConfigError(f"cache='1h' is Anthropic's 1-hour cache; the row of "
                                  f"{self.model!r} is priced by {rule.provider!r} rules, which "
                                  "have none", column="cache")  # fmt: skip
            return float(price.input * rule.write_1h)
        return float(price.cache_write)

    def cache_ratios(self) -> tuple[float, float]:
        """(read, write): what a prompt token read from the cache and one not
        read cost under this sheet, as multiples of the input price (the
        cache-aware policy's ``cache_read`` / ``cache_write``); (1, 1) without
        a cache (``cache="off"``, a ``none`` rule, a free input)."""
        price, rule = self.row.price, self.row.cache
        if self.cache == "off" or rule.provider == "none" or price.input <= 0:
            return 1.0, 1.0
        # Rounded: $0.30 / $3.00 is 0.1, not 0.09999999999999999.
        write = round((self.write_price() if rule.writes else price.input) / price.input, 9)
        return min(round(price.cached_input / price.input, 9), write), write


#: The token columns a price reads (``CALL_SCHEMA``'s).
_BILLED = ("prompt_tokens", "cached_tokens", "baseline_prompt_tokens", "baseline_cached_tokens",
           "output_tokens", "summary_input_tokens", "summary_output_tokens")  # fmt: skip


def _widened(column: Any, to: pa.DataType, kin: Any) -> Any:
    """``column`` cast to ``to`` where its type is of that kind (int32 to
    int64); another type is left for the core's typed error naming it."""
    return column.cast(to) if kin(column.type) else column


def price_calls(calls: pa.Table, sheet: Sheet,
                lifetimes: Mapping[str, float] | None = None) -> dict[str, Any]:  # fmt: skip
    """The calls of a per-call table (``CALL_SCHEMA``) priced under ``sheet``,
    call by call, with the baseline (the run without compaction) beside them:
    ``cost``, ``baseline_cost``, ``saved``, and the tokens billed as cache
    reads and writes under the provider's rules (the core's ``billing.rs``).
    ``lifetimes``: per session id, how long its cache entries live
    (``recorded.recorded_lifetimes``: a Claude Code run that wrote to
    Anthropic's 1-hour cache), under the default 5-minute cache when no
    lifetime was given (``cache_ttl_s``); the write price stays the sheet's."""
    price, rule = sheet.row.price, sheet.row.cache
    write = sheet.write_price()
    # Each call's cache lifetime: the sheet's, else the rule's for the cache
    # mode; a run's recorded one under the default 5-minute cache.
    ttl = sheet.ttl_s if sheet.ttl_s is not None else (
        rule.ttl_1h_s if sheet.cache == "1h" else rule.ttl_s)  # fmt: skip
    ttls = pa.repeat(pa.scalar(float(ttl)), calls.num_rows)
    if lifetimes and sheet.ttl_s is None and sheet.cache == "5m":
        ids = pc.index_in(calls.column("session_id"), value_set=pa.array(list(lifetimes)))
        given = pc.take(pa.array([float(v) for v in lifetimes.values()], pa.float64()), ids)
        ttls = pc.coalesce(given, pa.scalar(float(ttl)))
    since = calls.column("since_previous_s") if "since_previous_s" in calls.column_names else (
        pa.nulls(calls.num_rows, pa.float64()))  # fmt: skip
    columns = {n: _widened(calls.column(n), pa.int64(), pa.types.is_integer) for n in _BILLED}
    since = _widened(since, pa.float64(), lambda t: pa.types.is_floating(t) or pa.types.is_null(t))
    table = pa.table({**columns, "since_previous_s": since, "ttl_s": ttls})
    enabled = sheet.cache != "off" and rule.provider != "none"
    billed = _core.price_calls(table, (enabled, rule.min_tokens, rule.step, rule.writes),
                               (price.input, price.cached_input, write, price.output))  # fmt: skip
    cost, baseline, *tokens = billed
    names = ("cached_tokens", "written_tokens", "input_tokens", "baseline_cached_tokens",
             "baseline_written_tokens", "baseline_input_tokens")  # fmt: skip
    return {"model": sheet.model, "cache": sheet.cache, "cost": cost, "baseline_cost": baseline,
            "saved": baseline - cost, **dict(zip(names, tokens, strict=True)),
            "price_row": sheet.row.as_dict()}  # fmt: skip


#: A call reads under this share of the prefix it shares with the previous
#: call: a recorded cache break (``cache_breaks``; the core's
#: ``billing::BREAK_SHARE``, measured on the real Claude Code corpus,
#: docs/tuning.md: 861 of 872 calls read 99% or more of it, the partial
#: rewrites 69-95%, the breaks 0-28%).
BREAK_SHARE: float = _core.CACHE_BREAK_SHARE

#: A shared prefix shorter than this (recorded tokens) shows no break: no
#: provider reads under 1,024 tokens (OpenAI's minimum, Anthropic's least).
BREAK_MIN_TOKENS: int = _core.CACHE_BREAK_MIN_TOKENS

#: The rule ``cache_breaks`` applies, as ``summary["cache_break_rule"]`` says it.
CACHE_BREAK = (
    f"a call that recorded reading under {BREAK_SHARE:.0%} of the prefix the replay says it "
    "shares with the previous call (that share of the previous call's recorded prompt; at "
    f"least {BREAK_MIN_TOKENS:,} tokens), sent within the run's cache lifetime, is a cache "
    "break the runtime made: at that call every policy's cached prefix, the baseline's too, "
    "is capped at its prompt of the newest earlier call whose recorded prompt the recorded "
    "read reaches (a breakpoint written before), else at the prefix a call sharing nothing "
    "reads; a call after the run's own compaction, or in a run that carries its own prune "
    "marks, is none"
)


def cache_breaks(calls: pa.Table, recorded: Mapping[tuple[str, str], tuple[int, int]],
                 lifetimes: Mapping[str, float], prefixes: Mapping[str, int],
                 ttl_s: float = 300.0) -> tuple[pa.Table, dict[str, dict[str, Any]]]:  # fmt: skip
    """``calls`` (``CALL_SCHEMA``, calibrated or not) with the cache breaks
    each run recorded applied (``CACHE_BREAK``, the core's
    ``billing::cache_breaks``), and per session id that records per-call
    cache reads: ``cache_breaks`` (how many calls), ``cache_break_tokens``
    (the baseline's tokens read before, written now) and
    ``cache_break_calls`` (their indices). ``recorded``: (session id,
    message id) -> (recorded prompt, recorded cache read) per call
    (``calibrated.recorded_calls``); a run none of whose calls read from the
    cache records no reads and has no entry (nothing changes).
    ``lifetimes``: per run, its entries' lifetime (``recorded.recorded_lifetimes``;
    others ``ttl_s``): a call after a longer pause expired by the lifetime
    rule, no break. ``prefixes``: per run, what a prompt sharing nothing
    with the previous one reads (the calibrated run's first recorded read,
    ``calibrated.CACHED_PREFIX``; else 0)."""
    if not any(read > 0 for _, read in recorded.values()):
        return calls, {}
    ints = ("call", "prompt_tokens", "cached_tokens", "written_tokens", "baseline_prompt_tokens",
            "baseline_cached_tokens")  # fmt: skip
    columns = {n: _widened(calls.column(n), pa.int64(), pa.types.is_integer) for n in ints}
    ids = {n: _widened(calls.column(n), pa.string(), pa.types.is_dictionary)
           for n in ("session_id", "message_id")}  # fmt: skip
    since = _widened(calls.column("since_previous_s"), pa.float64(),
                     lambda t: pa.types.is_floating(t) or pa.types.is_null(t))  # fmt: skip
    cached, baseline_cached, written, runs = _core.cache_breaks(
        pa.table({**columns, **ids, "since_previous_s": since}),
        dict(recorded),
        dict(lifetimes),
        dict(prefixes),
        float(ttl_s),
    )
    for name, values in (("cached_tokens", cached), ("baseline_cached_tokens", baseline_cached),
                         ("written_tokens", written)):  # fmt: skip
        at = calls.schema.get_field_index(name)
        calls = calls.set_column(
            at, calls.schema.field(at), values.cast(calls.schema.field(at).type)
        )
    out = {sid: {"cache_breaks": n, "cache_break_tokens": tokens, "cache_break_calls": list(at)}
           for sid, n, tokens, at in runs}  # fmt: skip
    return calls, out


def model_names(model: str | Sequence[str] | None) -> list[str]:
    """``model`` as a list of names (``None``: none): a name, or several (a
    sheet each; the first is the ``cost``), each once."""
    if model is None:
        return []
    names: Iterable[Any] = [model] if isinstance(model, str) else model
    if isinstance(model, (bytes, Mapping)) or not isinstance(names, Iterable):
        raise ConfigError(f"model must be a model name (str), got {type(model).__name__} "
                          f"{model!r} (or a list of names, a price sheet each)",
                          column="model")  # fmt: skip
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise ConfigError(f"model must be a model name (str), got {type(name).__name__} "
                              f"{name!r}", column="model")  # fmt: skip
        if name in out:
            raise ConfigError(f"model {name!r} is given twice: give each price sheet once",
                              column="model")  # fmt: skip
        out.append(name)
    if not out:
        raise ConfigError("model is an empty list: name a model, or pass None", column="model")
    return out


__all__ = [
    "BREAK_MIN_TOKENS",
    "BREAK_SHARE",
    "CACHE_BREAK",
    "CACHE_MODES",
    "DEFAULT_RULES",
    "PROVIDERS",
    "CacheRule",
    "Sheet",
    "cache_breaks",
    "check_cache",
    "model_names",
    "price_calls",
]
