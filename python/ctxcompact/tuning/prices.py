"""What a model call costs: prices per million tokens, cache-aware.

A prompt token is billed one of two ways: read from the provider's prompt
cache (the prompt starts with exactly the tokens of a recent prompt) at the
cached-input price, or else sent fresh, which also writes it to the cache
(Anthropic bills that write above the input price; OpenAI's automatic cache
writes at the input price). Output tokens are billed at the output price.

The shipped table (``PRICE_ROWS``) holds list prices in USD, each row with
its source and the date it was read; a dated snapshot is priced only by a row
of its own (or a row listing it), never as its family, and a model no row
prices is an error naming the nearest rows. Give your own prices (they win)
with ``prices=`` or the config's ``prices`` (a ``[compaction.prices."<model>"]``
table in a config file, or ``CTXCOMPACT_PRICES`` as JSON); a price without
``cached_input`` has no cache discount, one without ``cache_write`` writes at
the input price. Each row carries its provider's cache rule (``tuning.cache``:
the minimum cacheable prompt, the steps tokens are read in, the 1-hour cache's
write price), which a price of your own names with ``provider``. Check the
rows against your own bill.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from ctxcompact.errors import ConfigError
from ctxcompact.tuning.cache import DEFAULT_RULES, CacheRule, anthropic_rule, openai_rule


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    cached_input: float
    cache_write: float
    output: float

    def cost(self, *, cached: int, written: int, output: int) -> float:
        """USD for a call that read ``cached`` prompt tokens from the cache, sent
        ``written`` fresh (and cached them) and produced ``output`` tokens."""
        return (
            cached * self.cached_input + written * self.cache_write + output * self.output
        ) / 1e6

    @classmethod
    def coerce(cls, value: Price | Mapping[str, Any], *, model: str = "") -> Price:
        if isinstance(value, Price):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"price of {model!r}: expected a table of prices, got "
                              f"{type(value).__name__}", column="prices")  # fmt: skip
        try:
            given = {k: float(value[k]) for k in ("input", "output")}
            cached = float(value.get("cached_input", given["input"]))
            write = float(value.get("cache_write", given["input"]))
        except KeyError as e:
            raise ConfigError(f"price of {model!r} has no {e.args[0]!r}",
                              column="prices") from None  # fmt: skip
        except (TypeError, ValueError) as e:
            raise ConfigError(f"price of {model!r}: {e}", column="prices") from None
        unknown = set(value) - {"input", "output", "cached_input", "cache_write", "provider"}
        cache_rule(value, model=model)  # a provider no rule names is refused here too
        if unknown:
            raise ConfigError(f"price of {model!r}: unknown field {sorted(unknown)[0]!r}",
                              column="prices")  # fmt: skip
        price = cls(given["input"], cached, write, given["output"])
        if min(price.input, price.cached_input, price.cache_write, price.output) < 0:
            raise ConfigError(f"price of {model!r} is negative", column="prices")
        return price


def cache_rule(value: Price | Mapping[str, Any], *, model: str = "") -> CacheRule:
    """The cache rule of a user's own price: its ``provider``'s (openai,
    anthropic, gemini, none), else ``prefix`` (every common-prefix token read
    at ``cached_input``, the rest written at ``cache_write``)."""
    provider = value.get("provider", "prefix") if isinstance(value, Mapping) else "prefix"
    if not isinstance(provider, str) or provider not in DEFAULT_RULES:
        raise ConfigError(f"price of {model!r}: provider must be one of "
                          f"{', '.join(p for p in DEFAULT_RULES if p != 'prefix')}, got "
                          f"{provider!r}", column="prices")  # fmt: skip
    return DEFAULT_RULES[provider]


@dataclass(frozen=True)
class PriceRow:
    """One row of the price table: the model it prices (``name``, and the
    dated snapshots ``snapshots`` the source gives that same price), the
    price, where it was read (``source``: a URL, or where a user's own price
    came from) and when (``read``)."""

    name: str
    price: Price
    source: str
    read: str
    snapshots: tuple[str, ...] = ()
    note: str = ""
    #: How the provider bills cache reads and writes (``tuning.cache``).
    cache: CacheRule = DEFAULT_RULES["prefix"]

    def describe(self) -> str:
        """``row 'gpt-4o' ($2.5 input, ...; source ..., read ...)``."""
        return describe_row(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        """The row for JSON output."""
        return {"row": self.name, "input": self.price.input,
                "cached_input": self.price.cached_input, "cache_write": self.price.cache_write,
                "output": self.price.output, "source": self.source, "read": self.read,
                "note": self.note, "cache_rule": self.cache.as_dict()}  # fmt: skip


def describe_row(row: Mapping[str, Any]) -> str:
    """One line naming a price row (``PriceRow.as_dict()``): its name, prices,
    source, when it was read, and its note."""
    cached = "no cache discount" if row["cached_input"] == row["input"] else (
        f"${row['cached_input']:g} cached")  # fmt: skip
    note = f"; {row['note']}" if row.get("note") else ""
    rule = row.get("cache_rule") or {}
    cache = "" if rule.get("provider") in (None, "prefix") else (
        f"; {rule['provider']} cache rules" + (f", at least {rule['min_tokens']:,} tokens"
                                               if rule.get("min_tokens") else "")
        + (f" in {rule['step']}-token steps" if rule.get("step", 1) > 1 else ""))  # fmt: skip
    return (f"row {row['row']!r} (${row['input']:g} input, {cached}, ${row['cache_write']:g} "
            f"cache write, ${row['output']:g} output per 1M tokens; source {row['source']}, "
            f"{row['read']}{note}{cache})")  # fmt: skip


_ANTHROPIC = "https://platform.claude.com/docs/en/docs/about-claude/pricing"
_STORED = "read 2026-11-29 from a stored copy (the page shows no date)"
_ANTHROPIC_NOTE = ("cache reads 0.1x input, 5-minute cache writes 1.25x input, 1-hour cache "
                   "writes 2x input (cache='1h')")  # fmt: skip
_OPENAI_CACHING = "https://openai.com/index/api-prompt-caching/"
_CACHING_READ = "page dated 2024-10-01, read 2026-11-29 from a stored copy"
_OPENAI_WRITE = "cache writes at the input price (OpenAI's cache is automatic and free)"
_UNVERIFIED = ("unverified: shipped before 2026-11 without a source; no OpenAI page giving "
               "this price was found in the stored copies")  # fmt: skip


def _anthropic(name: str, p: tuple[float, float, float, float], minimum: int,
               *snapshots: str) -> PriceRow:  # fmt: skip
    """An Anthropic row; ``minimum``: the model's minimum cacheable length."""
    return PriceRow(name, Price(*p), _ANTHROPIC, _STORED, snapshots, _ANTHROPIC_NOTE,
                    anthropic_rule(minimum))  # fmt: skip


_OPENAI_RULE = openai_rule()


#: The shipped price table (USD per million tokens), one row per model and one
#: per dated snapshot whose price differs from its family's. Each row names
#: its source and when it was read. A row's ``snapshots`` are the dated ids
#: the row covers: Anthropic's dated ids (one per model, billed as the model),
#: OpenAI's where the source names them.
PRICE_ROWS: tuple[PriceRow, ...] = (
    # Anthropic's pricing page: base input, cache hits, 5m cache writes, output;
    # then the minimum cacheable length (its prompt-caching page).
    _anthropic("claude-opus-4-6", (5.00, 0.50, 6.25, 25.00), 4_096),
    _anthropic("claude-opus-4-5", (5.00, 0.50, 6.25, 25.00), 4_096, "claude-opus-4-5-20251101"),
    _anthropic("claude-opus-4-1", (15.00, 1.50, 18.75, 75.00), 1_024, "claude-opus-4-1-20250805"),
    _anthropic("claude-opus-4", (15.00, 1.50, 18.75, 75.00), 1_024, "claude-opus-4-20250514"),
    _anthropic("claude-sonnet-4-6", (3.00, 0.30, 3.75, 15.00), 2_048),
    _anthropic("claude-sonnet-4-5", (3.00, 0.30, 3.75, 15.00), 1_024, "claude-sonnet-4-5-20250929"),
    _anthropic("claude-sonnet-4", (3.00, 0.30, 3.75, 15.00), 1_024, "claude-sonnet-4-20250514"),
    _anthropic("claude-haiku-4-5", (1.00, 0.10, 1.25, 5.00), 4_096, "claude-haiku-4-5-20251001"),
    _anthropic("claude-3-5-haiku", (0.80, 0.08, 1.00, 4.00), 2_048, "claude-3-5-haiku-20241022"),
    # OpenAI's GPT-5 model pages: input, cached input, output.
    PriceRow("gpt-5-mini", Price(0.25, 0.025, 0.25, 2.00),
             "https://developers.openai.com/ko-KR/api/docs/models/gpt-5-mini", _STORED,
             ("gpt-5-mini-2025-08-07",), _OPENAI_WRITE, _OPENAI_RULE),
    PriceRow("gpt-5-nano", Price(0.05, 0.005, 0.05, 0.40),
             "https://developers.openai.com/api/docs/models/gpt-5-nano.md", _STORED,
             ("gpt-5-nano-2025-08-07",), _OPENAI_WRITE, _OPENAI_RULE),
    PriceRow("gpt-5-codex", Price(1.25, 0.125, 1.25, 10.00),
             "https://developers.openai.com/api/docs/models/gpt-5-codex", _STORED,
             (), _OPENAI_WRITE, _OPENAI_RULE),
    # OpenAI's prompt-caching launch: the caching snapshots and their prices.
    PriceRow("gpt-4o", Price(2.50, 1.25, 2.50, 10.00), _OPENAI_CACHING, _CACHING_READ,
             ("gpt-4o-2024-08-06",),
             f"the price of gpt-4o-2024-08-06, which gpt-4o served then; {_OPENAI_WRITE}",
             _OPENAI_RULE),
    PriceRow("gpt-4o-mini", Price(0.15, 0.075, 0.15, 0.60), _OPENAI_CACHING, _CACHING_READ,
             ("gpt-4o-mini-2024-07-18",), _OPENAI_WRITE, _OPENAI_RULE),
    # The first GPT-4o snapshot: twice the price, and no prompt caching (the
    # launch above applied it to "the latest versions of GPT-4o" and listed
    # gpt-4o-2024-08-06 only), so cached tokens cost the full input price.
    PriceRow("gpt-4o-2024-05-13", Price(5.00, 5.00, 5.00, 15.00),
             "https://openrouter.ai/openai/gpt-4o-2024-05-13 (a third-party listing: no "
             "OpenAI page giving this snapshot's price was found in the stored copies)",
             _STORED, (), "no prompt caching: cached tokens at the input price",
             DEFAULT_RULES["none"]),
    # Shipped before 2026-11 (mid-2025 list prices); not verified since.
    PriceRow("gpt-4.1", Price(2.00, 0.50, 2.00, 8.00), _UNVERIFIED, "not read",
             ("gpt-4.1-2025-04-14",), _OPENAI_WRITE, _OPENAI_RULE),
    PriceRow("gpt-4.1-mini", Price(0.40, 0.10, 0.40, 1.60), _UNVERIFIED, "not read",
             ("gpt-4.1-mini-2025-04-14",), _OPENAI_WRITE, _OPENAI_RULE),
    PriceRow("o4-mini", Price(1.10, 0.275, 1.10, 4.40), _UNVERIFIED, "not read",
             ("o4-mini-2025-04-16",), _OPENAI_WRITE, _OPENAI_RULE),
)  # fmt: skip

#: Model name -> price, for the shipped rows (``PRICE_ROWS`` says where each came from).
PRICES: dict[str, Price] = {row.name: row.price for row in PRICE_ROWS}

#: Every name the shipped table prices (a row's own and its snapshots) -> its row.
_BY_NAME: dict[str, PriceRow] = {
    name: row for row in PRICE_ROWS for name in (row.name, *row.snapshots)
}

#: A release date at the end of a model name: ``-20250514`` (Anthropic),
#: ``-2025-04-14`` (OpenAI).
_DATE = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def nearest_rows(model: str, names: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``names`` nearest ``model``: those sharing the most
    leading dash-separated words with it (its release date left off: a dated
    snapshot is nearest its family), then the nearest version where the next
    word is a number on both sides (``claude-opus-4-7``: ``-4-6`` before
    ``-4-1``), then string similarity. A name sharing no leading word is
    named only when it is close as a string (a typo: ``claud-sonnet-4``)."""
    base = _DATE.sub("", model).lower()
    words = base.split("-")

    def key(name: str) -> tuple[int, float, float, str]:
        theirs = name.lower().split("-")
        shared = 0
        for a, b in zip(words, theirs, strict=False):
            if a != b:
                break
            shared += 1
        gap = math.inf
        with suppress(IndexError, ValueError):
            gap = abs(float(words[shared]) - float(theirs[shared]))
        similar = difflib.SequenceMatcher(None, base, name.lower()).ratio()
        return -shared, gap, -similar, name

    ranked = sorted(key(m) for m in set(names))
    return [name for shared, _, similar, name in ranked if shared < 0 or -similar >= 0.75][:n]


def price_row(model: str, prices: Mapping[str, Any] | None = None, *,
              given_by: str = "prices=") -> PriceRow:  # fmt: skip
    """The row that prices ``model``: ``prices`` (the user's own, by exact
    name; its source is ``given_by``) else the shipped table's row naming the
    model or listing it among its dated snapshots. A name no row gives is a
    ``ConfigError`` naming the nearest rows: a dated snapshot is never priced
    as its family (``gpt-4o-2024-05-13`` cost twice ``gpt-4o``)."""
    own = dict(prices or {})
    if model in own:
        return PriceRow(model, Price.coerce(own[model], model=model), f"your prices ({given_by})",
                        "given by you", cache=cache_rule(own[model], model=model))  # fmt: skip
    if model in _BY_NAME:
        return _BY_NAME[model]
    near = nearest_rows(model, [*own, *(row.name for row in PRICE_ROWS)])
    which = f"nearest rows: {', '.join(near)}" if near else (
        f"rows: {', '.join(sorted(row.name for row in PRICE_ROWS))}")  # fmt: skip
    dated = " (a dated snapshot is priced only by a row of its own, not by its family's)" if (
        _DATE.search(model)) else ""  # fmt: skip
    raise ConfigError(f"no price for model {model!r}{dated}; {which}; {UNKNOWN_HINT}",
                      column="prices")  # fmt: skip


def price_of(model: str, prices: Mapping[str, Any] | None = None) -> Price:
    """The price of ``model`` (``price_row(model, prices).price``)."""
    return price_row(model, prices).price


#: How to price a model the table lacks (the CLI rewrites it: it has no prices=).
UNKNOWN_HINT = "pass prices={model: {'input': ..., 'output': ...}} or set the config's prices"


def row_for(model: str | None, *overrides: tuple[Mapping[str, Any] | None, str]) -> PriceRow | None:
    """``price_row(model)`` with the override tables merged in order (the
    config's, then the caller's), each with where it came from; ``None`` when
    no model is named."""
    if model is None:
        return None
    if not isinstance(model, str):
        raise ConfigError(f"model must be a model name (str), got {type(model).__name__} "
                          f"{model!r}", column="model")  # fmt: skip
    merged: dict[str, Any] = {}
    where = "prices="
    for table, source in overrides:
        if table is not None and not isinstance(table, Mapping):
            raise ConfigError("prices must be a dict of model name -> {'input': ..., "
                              f"'output': ...}}, got {type(table).__name__}",
                              column="prices")  # fmt: skip
        if table and model in table:
            where = source
        merged |= table or {}
    return price_row(model, merged, given_by=where)


def price_for(model: str | None, *overrides: Mapping[str, Any] | None) -> Price | None:
    """``price_of(model)`` with the override tables merged in order (the
    config's, then the caller's); ``None`` when no model is named."""
    row = row_for(model, *((table, "prices=") for table in overrides))
    return row.price if row is not None else None


__all__ = [
    "PRICES",
    "PRICE_ROWS",
    "Price",
    "PriceRow",
    "cache_rule",
    "describe_row",
    "nearest_rows",
    "price_for",
    "price_of",
    "price_row",
    "row_for",
]
