"""What a model call costs: prices per million tokens, cache-aware.

A prompt token is billed one of two ways: read from the provider's prompt
cache (the prompt starts with exactly the tokens of a recent prompt) at the
cached-input price, or else sent fresh, which also writes it to the cache
(Anthropic bills that write above the input price; OpenAI's automatic cache
writes at the input price). Output tokens are billed at the output price.

The shipped table holds list prices in USD as published by OpenAI and
Anthropic for their common models (mid-2025); check them against your own
bill and pass your own with ``prices=`` where they differ.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxcompact.errors import ConfigError


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
        unknown = set(value) - {"input", "output", "cached_input", "cache_write"}
        if unknown:
            raise ConfigError(f"price of {model!r}: unknown field {sorted(unknown)[0]!r}",
                              column="prices")  # fmt: skip
        price = cls(given["input"], cached, write, given["output"])
        if min(price.input, price.cached_input, price.cache_write, price.output) < 0:
            raise ConfigError(f"price of {model!r} is negative", column="prices")
        return price


#: List prices (USD per million tokens). OpenAI: cached input at its published
#: discount, cache writes at the input price. Anthropic: cache reads at 0.1x
#: and 5-minute cache writes at 1.25x the input price.
PRICES: dict[str, Price] = {
    "gpt-4.1": Price(2.00, 0.50, 2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 0.40, 1.60),
    "gpt-4o": Price(2.50, 1.25, 2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.15, 0.60),
    "o4-mini": Price(1.10, 0.275, 1.10, 4.40),
    "claude-opus-4": Price(15.00, 1.50, 18.75, 75.00),
    "claude-sonnet-4": Price(3.00, 0.30, 3.75, 15.00),
    "claude-3-5-haiku": Price(0.80, 0.08, 1.00, 4.00),
    # From Anthropic's pricing page (platform.claude.com/docs/en/docs/about-claude/
    # pricing: base input, cache hits, 5m cache writes, output), for the models
    # the ModelRegistry knows. OpenAI's gpt-5 family is left out: no OpenAI
    # price page giving its cached-input and output prices was found to cite.
    "claude-opus-4-1": Price(15.00, 1.50, 18.75, 75.00),
    "claude-sonnet-4-5": Price(3.00, 0.30, 3.75, 15.00),
    "claude-haiku-4-5": Price(1.00, 0.10, 1.25, 5.00),
}


#: A release date at the end of a model name: ``-20250514`` (Anthropic),
#: ``-2025-04-14`` (OpenAI).
_DATE = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def price_of(model: str, prices: Mapping[str, Any] | None = None) -> Price:
    """The price of ``model``: from ``prices`` (overrides) else the shipped table.
    A model name matches itself, or its family when it only adds a release date
    (``claude-sonnet-4-20250514``, ``gpt-4.1-mini-2025-04-14``); any other
    name (``gpt-4.1-nano``, ``claude-opus-4-5``) needs its own price."""
    table: dict[str, Any] = {**PRICES, **(prices or {})}
    for name in (model, _DATE.sub("", model)):
        if name in table:
            return Price.coerce(table[name], model=name)
    raise ConfigError(f"no price for model {model!r}; known: {', '.join(sorted(table))}, and "
                      f"each with a release date (-20250514 or -2025-04-14); {UNKNOWN_HINT}",
                      column="prices")  # fmt: skip


#: How to price a model the table lacks (the CLI rewrites it: it has no prices=).
UNKNOWN_HINT = "pass prices={model: {'input': ..., 'output': ...}} or set the config's prices"


def price_for(model: str | None, *overrides: Mapping[str, Any] | None) -> Price | None:
    """``price_of(model)`` with the override tables merged in order (the
    config's, then the caller's); ``None`` when no model is named."""
    if model is None:
        return None
    if not isinstance(model, str):
        raise ConfigError(f"model must be a model name (str), got {type(model).__name__} "
                          f"{model!r}", column="model")  # fmt: skip
    merged: dict[str, Any] = {}
    for table in overrides:
        if table is not None and not isinstance(table, Mapping):
            raise ConfigError("prices must be a dict of model name -> {'input': ..., "
                              f"'output': ...}}, got {type(table).__name__}",
                              column="prices")  # fmt: skip
        merged |= table or {}
    return price_of(model, merged)


__all__ = ["PRICES", "Price", "price_for", "price_of"]
