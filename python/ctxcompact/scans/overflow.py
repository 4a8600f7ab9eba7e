"""Overflow detection, token budgets and the model-limits registry.

Default semantics are OpenCode's: ``count = input + cache.read + output`` of
the last finished step; ``usable = limit.input`` if set, else
``limit.context - min(limit.output or 32_000, 32_000)``; overflow when
``count > usable``; a context of 0 means unlimited. The variants later
OpenCode releases adopted are configuration (see ``OverflowOptions``).
"""

from __future__ import annotations

import difflib
import json
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Self

import ctxcompact._core as _core
from ctxcompact.config import default
from ctxcompact.errors import (
    CompactionError,
    ConfigError,
    InputTypeError,
    InvalidUsageError,
    UnknownModelError,
)

_INT64_MAX = 2**63 - 1


def _read(source: Any, key: str) -> Any:
    """A key of a mapping, or an attribute of a model object (None: not there)."""
    return source.get(key) if isinstance(source, Mapping) else getattr(source, key, None)


def _count(source: Any, key: str, *, required: bool) -> int:
    value = _read(source, key)
    if value is None:
        if required:
            raise InvalidUsageError(f"usage has no {key!r} count")
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidUsageError(f"usage {key!r} must be an integer, got {value!r}")
    if value > _INT64_MAX:
        raise InvalidUsageError(f"usage {key!r} is beyond int64: {value}")
    return value


#: What a usage mapping may hold (OpenCode's message tokens; ``total`` as its
#: later releases write it, not read).
_USAGE_KEYS = ("input", "output", "reasoning", "cache", "total")


def _known_keys(
    values: Mapping[Any, Any],
    known: tuple[str, ...],
    what: str,
    error: type[InvalidUsageError] | type[ConfigError] = InvalidUsageError,
) -> None:
    """A key outside ``known`` (a misspelt count or limit) would be dropped silently."""
    for key in values:
        if key not in known:
            hint = difflib.get_close_matches(str(key), known, n=1)
            raise error(
                f"unknown key {key!r} in {what}"
                + (f" (did you mean {hint[0]!r}?)" if hint else "")
                + f"; known: {', '.join(known)}",
                column=str(key),
            )


class _Coerced:
    """What ``Usage`` and ``Limits`` share: ``coerce`` takes one as it is,
    refuses None with the class's ``_missing`` error, and reads anything else
    with the class's ``_parse``."""

    _missing: ClassVar[Callable[[], CompactionError]]

    @classmethod
    def coerce(cls, value: Any) -> Self:
        if isinstance(value, cls):
            return value
        if value is None:
            raise cls._missing()
        return cls._parse(value)

    @classmethod
    def _parse(cls, value: Any) -> Self:
        raise NotImplementedError


@dataclass(frozen=True)
class Usage(_Coerced):
    """Token usage of one model step, normalised from a dict or a model object."""

    input: int
    output: int
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0
    _missing = partial(InvalidUsageError, "usage is missing")

    @classmethod
    def _parse(cls, usage: Any) -> Self:
        if isinstance(usage, Mapping):
            _known_keys(usage, _USAGE_KEYS, "usage")
        cache = _read(usage, "cache")
        cache = cache if cache is not None else {}
        if isinstance(cache, Mapping):
            _known_keys(cache, ("read", "write"), "usage 'cache'")
        elif not (hasattr(cache, "read") or hasattr(cache, "write")):
            raise InvalidUsageError(
                f"usage 'cache' must be a mapping of 'read' and 'write' counts, got {cache!r}"
            )
        return cls(
            input=_count(usage, "input", required=True),
            output=_count(usage, "output", required=True),
            reasoning=_count(usage, "reasoning", required=False),
            cache_read=_count(cache, "read", required=False),
            cache_write=_count(cache, "write", required=False),
        )


@dataclass(frozen=True)
class Limits(_Coerced):
    """Model limits normalised from a dict or a model object (0 = unset)."""

    context: int
    input: int = 0
    output: int = 0
    _missing = partial(ConfigError, "model limits are missing", column="limits")

    @classmethod
    def _parse(cls, limits: Any) -> Self:
        if isinstance(limits, (str, bytes, int, float)):
            hint = (" (ModelRegistry().get(name) looks a model's limits up)"
                    if isinstance(limits, str) else "")  # fmt: skip
            raise ConfigError(
                f"model limits must be a dict with 'context' (and 'input', 'output'), Limits or "
                f"ModelLimits, got {type(limits).__name__} {limits!r}{hint}",
                column="limits",
            )
        if isinstance(limits, Mapping):
            _known_keys(limits, ("context", "input", "output"), "model limits", ConfigError)

        values: dict[str, int] = {}
        for key in ("context", "input", "output"):
            v = _read(limits, key)
            if v is None:
                if key == "context":
                    raise ConfigError("model limits have no 'context'", column="limits")
                v = 0
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _INT64_MAX:
                raise ConfigError(f"model limit {key!r} must be a non-negative integer, got {v!r}",
                                  column="limits")  # fmt: skip
            values[key] = v
        return cls(**values)

    def reserve(self, config: Any = None) -> int:
        """Tokens kept for the answer: the output limit, capped at ``output_token_max``."""
        cap = OverflowOptions.from_config(config).output_token_max
        return min(self.output or cap, cap)

    def usable(self, config: Any = None) -> int | None:
        """Tokens the model can take as input (``None``: no context limit).

        The one definition of the usable window, the core's (overflow.rs):
        ``input`` (less ``reserved`` headroom) when set, else ``context -
        reserve``, under the ``config``'s overflow options.
        """
        if self.context == 0:
            return None
        return check_overflow({"input": 0, "output": 0}, self, config).usable


@dataclass(frozen=True)
class OverflowOptions:
    """How overflow is computed: the overflow fields of ``CompactionConfig``,
    with its defaults (OpenCode's first release). ``reserved``: headroom
    subtracted from ``limit.input`` when it is set; ``None`` = off,
    ``"default"`` = ``min(20_000, output reserve)`` as later OpenCode does."""

    auto: bool = default("auto")
    output_token_max: int = default("output_token_max")
    reserved: int | str | None = default("reserved")
    inclusive: bool = default("inclusive")
    count_cache_write: bool = default("count_cache_write")
    clamp_usable: bool = default("clamp_usable")

    @classmethod
    def from_config(cls, config: Any) -> OverflowOptions:
        if config is None:
            return cls()
        if isinstance(config, OverflowOptions):
            return config
        names = [f.name for f in fields(cls)]
        if isinstance(config, Mapping):
            for key in config:
                if key not in names:
                    raise ConfigError(
                        f"unknown overflow option {key!r}; known: {', '.join(names)}", column=key
                    )
            return cls(**dict(config))
        if any(hasattr(config, name) for name in names):
            # a CompactionConfig, or any object with the fields
            values: dict[str, Any] = {}
            for f in fields(cls):
                values[f.name] = getattr(config, f.name, f.default)
            return cls(**values)
        raise ConfigError(
            "overflow options must be a CompactionConfig, an OverflowOptions or a mapping "
            f"of their fields, got {type(config).__name__}"
        )

    def __post_init__(self) -> None:
        """Typed options, as ``CompactionConfig`` validates them."""
        for name in ("auto", "inclusive", "count_cache_write", "clamp_usable"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(
                    f"overflow option {name!r} must be true or false, "
                    f"got {getattr(self, name)!r}", column=name,
                )  # fmt: skip
        cap = self.output_token_max
        if isinstance(cap, bool) or not isinstance(cap, int) or not 0 <= cap <= _INT64_MAX:
            raise ConfigError(f"output_token_max must be a non-negative integer, got {cap!r}",
                              column="output_token_max")  # fmt: skip
        reserved = self.reserved
        if not (
            reserved is None
            or reserved == "default"
            or (isinstance(reserved, int) and not isinstance(reserved, bool) and reserved >= 0)
        ):
            raise ConfigError(
                f"reserved must be a non-negative integer, 'default' or None, got {reserved!r}",
                column="reserved",
            )


def check_window(limits: Limits, config: Any = None, where: str = "") -> Limits:
    """``limits``, or ``ConfigError`` when they leave no input window (every
    call would overflow and compact; a split would cut the whole history).
    The one check of every entry point taking a window: the ``Compactor``,
    ``compact_messages`` / ``should_compact``, ``compact_batch`` /
    ``compact_parquet``, replay and tune."""
    usable = limits.usable(config)
    if usable is not None and usable <= 0:
        cap = OverflowOptions.from_config(config).output_token_max
        raise ConfigError(
            f"{where}context {limits.context} leaves no usable input window ({usable:,} "
            f"tokens): {limits.context - usable:,} are reserved for the answer (the output "
            f"limit, else output_token_max = {cap:,}); give the model's "
            "output limit or a larger context",
            column="context",
        )  # fmt: skip
    return limits


@dataclass(frozen=True)
class OverflowReport:
    overflow: bool
    #: Tokens the last step put into the context.
    count: int
    #: Tokens the model can take as input.
    usable: int


def check_overflow(usage: Any, limits: Any, config: Any = None) -> OverflowReport:
    """Overflow decision with the numbers behind it."""
    u, lim, opts = Usage.coerce(usage), Limits.coerce(limits), OverflowOptions.from_config(config)
    reserved = opts.reserved
    over, count, usable = _core.overflow_check(
        u.input,
        u.output,
        u.reasoning,
        u.cache_read,
        u.cache_write,
        lim.context,
        lim.input,
        lim.output,
        auto=opts.auto,
        output_token_max=opts.output_token_max,
        reserved=reserved if isinstance(reserved, int) else None,
        reserved_default=reserved == "default",
        inclusive=opts.inclusive,
        count_cache_write=opts.count_cache_write,
        clamp_usable=opts.clamp_usable,
    )
    return OverflowReport(overflow=over, count=count, usable=usable)


def is_overflow(usage: Any, limits: Any, config: Any = None) -> bool:
    """Whether the last step's usage overflows the model's usable input.

    ``usage``: ``{"input", "output", "reasoning", "cache": {"read", "write"}}``
    or a ``TokenUsage``; ``limits``: ``{"context", "input", "output"}`` or a
    ``ModelLimits``; ``config``: ``OverflowOptions``, a ``CompactionConfig``
    or a mapping of the overflow options.
    Negative counts raise ``InvalidUsageError``.
    """
    return check_overflow(usage, limits, config).overflow


@dataclass(frozen=True)
class TokenBudget:
    """Proactive budget (seeds 001/004): how full the window is before the next call.

    ``available = context - system - output_reserve - safety_buffer`` tokens are
    for the history; ``utilization = history / available``. Compact when it
    reaches ``proactive`` (0.80); ``critical`` (0.95) means compact now, even
    mid-turn.
    """

    context: int
    history_tokens: int
    system_tokens: int = 0
    output_reserve: int = 0
    safety_buffer: int = 0
    proactive: float = 0.80
    critical: float = 0.95

    def __post_init__(self) -> None:
        for name in (
            "context",
            "history_tokens",
            "system_tokens",
            "output_reserve",
            "safety_buffer",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                # Compared with 0 below: a str was a bare TypeError.
                raise InputTypeError(f"{name} must be a number of tokens, got "
                                     f"{type(value).__name__}")  # fmt: skip
            if value < 0:
                raise ConfigError(f"{name} must not be negative")
        if not 0 < self.proactive < self.critical <= 1:
            raise ConfigError("thresholds must satisfy 0 < proactive < critical <= 1")

    @classmethod
    def for_limits(
        cls, limits: Any, *, history_tokens: int, system_tokens: int = 0, config: Any = None
    ) -> TokenBudget | None:
        """The budget of a model's ``limits`` (``None`` when unlimited).

        ``config`` (a ``CompactionConfig``) gives the overflow options, the
        system reserve added to ``system_tokens``, the safety buffer and the
        thresholds.
        """
        from ctxcompact.config import CompactionConfig

        cfg = config if config is not None else CompactionConfig()
        lim = Limits.coerce(limits)
        usable = lim.usable(cfg)
        if usable is None:
            return None
        reserve = lim.reserve(cfg)
        return cls(
            context=max(0, usable + reserve),
            history_tokens=history_tokens,
            system_tokens=system_tokens + cfg.system_reserve,
            output_reserve=reserve,
            safety_buffer=cfg.safety_buffer,
            proactive=cfg.proactive_threshold,
            critical=cfg.critical_threshold,
        )

    @property
    def available(self) -> int:
        return max(0, self.context - self.system_tokens - self.output_reserve - self.safety_buffer)

    @property
    def utilization(self) -> float:
        if self.context == 0:
            return 0.0  # unlimited
        if self.available == 0:
            return float("inf")
        return self.history_tokens / self.available

    @property
    def threshold_tokens(self) -> int:
        """History size at which proactive compaction starts."""
        return int(self.available * self.proactive)

    @property
    def critical_tokens(self) -> int:
        """History size at which compaction is critical."""
        return int(self.available * self.critical)

    @property
    def should_compact(self) -> bool:
        # Compared in whole tokens (seed 004: tokens >= floor(available * pct)),
        # so `threshold_tokens` is exactly where this turns true.
        return self.context != 0 and self.history_tokens >= self.threshold_tokens

    @property
    def is_critical(self) -> bool:
        return self.context != 0 and self.history_tokens >= self.critical_tokens


#: Limits of widely used models as the providers publish them (context window,
#: most output tokens; ``input`` where the provider caps the prompt below the
#: window). Dated names are the snapshots; an undated name (``gpt-5``,
#: ``claude-sonnet-4-5``) or a ``-latest`` alias resolves to the newest dated
#: entry of that name (see ``ModelRegistry.resolve``). Extend or replace them
#: with ``ModelRegistry.from_file``; an unknown model is an error unless the
#: caller passes an explicit default.
BUILTIN_LIMITS: dict[str, Limits] = {
    # OpenAI. GPT-5: a 400k window of which at most 272k input and 128k output.
    "gpt-5-2025-08-07": Limits(context=400_000, input=272_000, output=128_000),
    "gpt-5-mini-2025-08-07": Limits(context=400_000, input=272_000, output=128_000),
    "gpt-5-nano-2025-08-07": Limits(context=400_000, input=272_000, output=128_000),
    "gpt-5-chat-latest": Limits(context=128_000, output=16_384),
    "gpt-4.1-2025-04-14": Limits(context=1_047_576, output=32_768),
    "gpt-4.1-mini-2025-04-14": Limits(context=1_047_576, output=32_768),
    "gpt-4.1-nano-2025-04-14": Limits(context=1_047_576, output=32_768),
    "o3-2025-04-16": Limits(context=200_000, output=100_000),
    "o3-pro-2025-06-10": Limits(context=200_000, output=100_000),
    "o3-mini-2025-01-31": Limits(context=200_000, output=100_000),
    "o4-mini-2025-04-16": Limits(context=200_000, output=100_000),
    "o1-2024-12-17": Limits(context=200_000, output=100_000),
    "gpt-4o-2024-05-13": Limits(context=128_000, output=4_096),
    "gpt-4o-2024-08-06": Limits(context=128_000, output=16_384),
    "gpt-4o-2024-11-20": Limits(context=128_000, output=16_384),
    "gpt-4o-mini-2024-07-18": Limits(context=128_000, output=16_384),
    "gpt-4-turbo-2024-04-09": Limits(context=128_000, output=4_096),
    "gpt-4": Limits(context=8_192, output=8_192),
    "gpt-3.5-turbo": Limits(context=16_385, output=4_096),
    # Anthropic (standard limits; the 1M-context beta is the ``betas`` argument of ``get``).
    "claude-sonnet-4-5-20250929": Limits(context=200_000, output=64_000),
    "claude-haiku-4-5-20251001": Limits(context=200_000, output=64_000),
    "claude-opus-4-1-20250805": Limits(context=200_000, output=32_000),
    "claude-opus-4-20250514": Limits(context=200_000, output=32_000),
    "claude-sonnet-4-20250514": Limits(context=200_000, output=64_000),
    "claude-3-7-sonnet-20250219": Limits(context=200_000, output=64_000),
    "claude-3-5-sonnet-20241022": Limits(context=200_000, output=8_192),
    "claude-3-5-sonnet-20240620": Limits(context=200_000, output=8_192),
    "claude-3-5-haiku-20241022": Limits(context=200_000, output=8_192),
    "claude-3-opus-20240229": Limits(context=200_000, output=4_096),
    "claude-3-haiku-20240307": Limits(context=200_000, output=4_096),
}

#: A snapshot date at the end of a model name: Anthropic's ``-20250929``, OpenAI's
#: ``-2025-08-07``.
_DATED = re.compile(r"^(?P<alias>.+)-(?P<date>\d{8}|\d{4}-\d{2}-\d{2})$")


#: Anthropic's beta flag prefix for the 1M-token context window, and the
#: model families that accept it (Claude Sonnet 4 and 4.5).
CONTEXT_1M_BETA = "context-1m"
CONTEXT_1M_MODELS = ("claude-sonnet-4",)


class ModelRegistry:
    """Model name -> limits. Load your own from a JSON or TOML file::

    {"my-model": {"context": 128000, "output": 8192}, ...}
    """

    def __init__(self, limits: Mapping[str, Any] | None = None, *, builtin: bool = True) -> None:
        self._limits: dict[str, Limits] = dict(BUILTIN_LIMITS) if builtin else {}
        for name, value in (limits or {}).items():
            self.register(name, value)

    def register(self, model: str, limits: Any) -> None:
        try:
            self._limits[model] = Limits.coerce(limits)
        except ConfigError as e:
            raise ConfigError(f"model {model!r}: {e}") from None

    @classmethod
    def from_file(cls, path: str | Path, *, builtin: bool = True) -> ModelRegistry:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read the model registry: {e}") from None
        try:
            if path.suffix == ".toml":
                import tomllib

                data: Any = tomllib.loads(text)
            else:
                data = json.loads(text)
        except ValueError as e:  # JSONDecodeError and TOMLDecodeError are ValueErrors
            raise ConfigError(
                f"{path}: not valid {path.suffix.lstrip('.') or 'JSON'}: {e}"
            ) from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a table of model name -> limits")
        return cls(data, builtin=builtin)

    def resolve(self, model: str) -> str | None:
        """The registered name ``model`` stands for, or ``None``.

        An exact name wins; otherwise an undated alias (``claude-sonnet-4-5``,
        ``gpt-5``, or with ``-latest``) stands for the newest dated entry of
        that name (``claude-sonnet-4-5-20250929``). Only a date may follow the
        alias: ``claude-sonnet-4`` is not ``claude-sonnet-4-5-...``.
        """
        if not isinstance(model, str):
            raise InputTypeError(f"a model name must be a string, got {type(model).__name__}")
        if model in self._limits:
            return model
        alias = model.removesuffix("-latest")
        if alias in self._limits:
            return alias
        dated = [
            (m["date"].replace("-", ""), name)
            for name in self._limits
            if (m := _DATED.match(name)) is not None and m["alias"] == alias
        ]
        return max(dated)[1] if dated else None

    def names(self) -> list[str]:
        """Every name ``get`` accepts: the registered ones and their undated aliases."""
        aliases = {m["alias"] for name in self._limits if (m := _DATED.match(name))}
        return sorted(set(self._limits) | aliases)

    def get(self, model: str, default: Any = None, *, betas: Iterable[str] = ()) -> Limits:
        """Limits of ``model`` (a registered name or an alias, see ``resolve``);
        ``UnknownModelError`` naming the closest known names if unknown and no ``default``.

        ``betas``: the API beta flags of the request. Anthropic's 1M-token
        context beta (``context-1m-...``) raises the context of the models that
        support it to 1,000,000; other models and flags change nothing.
        """
        name = self.resolve(model)
        if name is not None:
            found = self._limits[name]
            if any(b.startswith(CONTEXT_1M_BETA) for b in betas) and name.startswith(
                CONTEXT_1M_MODELS
            ):
                return replace(found, context=1_000_000)
            return found
        if default is not None:
            return Limits.coerce(default)
        names = self.names()
        by_lower = {n.lower(): n for n in names}
        close = [by_lower[n] for n in difflib.get_close_matches(model.lower(), by_lower, n=5)]
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise UnknownModelError(
            f"no limits known for model {model!r}{hint}; register it or pass default=",
            column="model",
        )

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.resolve(model) is not None

    def __len__(self) -> int:
        return len(self._limits)


#: The tokenizer family each model counts its prompt in, by name prefix (the
#: first prefix that matches wins, so the longer ones come first); ``None``:
#: no public tokenizer, the prompt is estimated. Sources: tiktoken's
#: ``model.py`` ``MODEL_PREFIX_TO_ENCODING`` / ``MODEL_TO_ENCODING`` (gpt-4o,
#: gpt-4.1, gpt-5, o1/o3/o4 -> o200k_base; gpt-4, gpt-3.5 -> cl100k_base);
#: Meta's llama-models (Llama 3.x: the tiktoken ``tokenizer.model``); Qwen's
#: ``qwen.tiktoken`` (Qwen 1-2.5, dashscope); mistral-common's tekken files
#: (Mistral NeMo and later, Codestral); DeepSeek's ``tokenizer.json`` (V3/R1).
#: Anthropic and Google publish no tokenizer for Claude 3+ or Gemini: estimate.
TOKENIZER_FAMILIES: tuple[tuple[str, str | None], ...] = (
    ("gpt-4o", "o200k"),
    ("gpt-4.1", "o200k"),
    ("gpt-4.5", "o200k"),
    ("gpt-5", "o200k"),
    ("chatgpt-4o", "o200k"),
    ("o1", "o200k"),
    ("o3", "o200k"),
    ("o4", "o200k"),
    ("gpt-4", "cl100k"),
    ("gpt-3.5", "cl100k"),
    ("llama-3", "llama3"),
    ("llama3", "llama3"),
    ("meta-llama-3", "llama3"),
    ("qwen", "qwen"),
    ("mistral", "tekken"),
    ("codestral", "tekken"),
    ("open-mistral", "tekken"),
    ("deepseek", "deepseek"),
    ("claude", None),
    ("gemini", None),
)


def family_for(model: str | None) -> str | None:
    """The tokenizer family ``model`` is counted in exactly (``"o200k"``, ...),
    or ``None`` where it is not known (Claude, Gemini, an unknown or missing
    model): the prompt is then estimated. A provider prefix (``openai/``,
    ``azure/``) and the case are ignored: ``openai/GPT-4o-2024-08-06`` is o200k."""
    if model is None:
        return None
    if not isinstance(model, str):
        raise InputTypeError(f"a model name must be a string, got {type(model).__name__}")
    name = model.rsplit("/", 1)[-1].strip().lower()
    for prefix, family in TOKENIZER_FAMILIES:
        if name.startswith(prefix):
            # ``o1``/``o3``/``o4`` only as a whole name part (``o1-mini``, not ``o100``)
            rest = name[len(prefix) :]
            if prefix[0] == "o" and prefix[1:].isdigit() and rest[:1] not in ("", "-"):
                continue
            return family
    return None


def method_for(config: Any, model: str | None, counted: Iterable[str] | None = None) -> Any:
    """Which count a run gets (the one rule): the config's ``estimate_method``
    when set explicitly (``--method``, a file, the environment, an argument);
    else ``<family>-exact`` for the family ``model`` counts in
    (``family_for``), where ``counted`` is None or holds it (a live store's
    ``counted_families``: only what it keeps counted is read exactly); else
    the config's estimate."""
    if config.sources().get("estimate_method", "default") != "default":
        return config.estimate_method
    family = family_for(model)
    if family is None or (counted is not None and family not in counted):
        return config.estimate_method
    return f"{family}-exact"
