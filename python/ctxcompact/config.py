"""One configuration for every compaction decision.

Defaults reproduce OpenCode. Values come from (highest first) keyword
arguments, ``CTXCOMPACT_*`` environment variables, a TOML/JSON file, and the
defaults. ``CTXCOMPACT_DISABLE_AUTOCOMPACT`` and ``CTXCOMPACT_DISABLE_PRUNE``
mirror OpenCode's ``OPENCODE_DISABLE_*`` switches.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    Field,
    NonNegativeInt,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from ctxcompact.errors import ConfigError
from ctxcompact.estimators import EstimateMethod
from ctxcompact.policy import Policy

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _switched_on(env: str) -> bool:
    """Whether kill switch ``env`` is set; a value that is neither true nor
    false is an error (read as off, it would leave on what was meant off)."""
    value = os.environ.get(env, "").strip().lower()
    if value not in _TRUE | _FALSE:
        raise ConfigError(
            f"environment {env}={os.environ[env]!r}: not a boolean "
            "(1/true/yes/on or 0/false/no/off)",
            column=env,
        )
    return value in _TRUE


_POLICY_DEFAULTS = Policy()
#: A share of the available window (a threshold).
Share = Annotated[float, Field(gt=0, le=1)]
#: OpenCode's prune fields and the policy options they set.
PRUNE_FIELDS = {
    "prune_protect": "protect",
    "prune_minimum": "minimum",
    "prune_protected_tools": "exclude_tools",
    "prune_continue_past_compacted": "continue_past_compacted",
    "prune": "enabled",
}


class CompactionConfig(BaseSettings):
    """Every knob of estimate, overflow, prune, summary and lifecycle."""

    model_config = SettingsConfigDict(
        env_prefix="CTXCOMPACT_", extra="forbid", validate_assignment=True
    )

    # --- switches (OpenCode's compaction.auto / compaction.prune)
    auto: bool = Field(
        True, description="Compact automatically when a session overflows its model's window."
    )
    prune: bool = Field(True, description="Prune old tool outputs (soft compaction).")
    mask_first: bool = Field(
        False,
        description="Hybrid: prune by the policy before every model call, and summarize only "
        "when that cannot bring the context under the threshold; the summary then reads the "
        "outputs masked since the last round (cut to summary_recall_tokens each).",
    )
    summary_recall_tokens: NonNegativeInt = Field(
        1000,
        description="With mask_first, how much of each masked output (about N tokens, head "
        "and tail) the summarizer reads in place of its placeholder.",
    )

    # --- prune (soft compaction): the policy, and OpenCode's four knobs, which
    # override the policy's protect / minimum / exclude_tools /
    # continue_past_compacted when set (argument, environment or file)
    policy: Annotated[Policy, NoDecode] = Field(
        default_factory=Policy,
        description="What prune may clear: a preset name (opencode, swe-agent, "
        "anthropic-clear-tool-uses, aggressive), a TOML/JSON file, JSON, or a table "
        "of options (docs/policies.md).",
    )
    prune_protect: NonNegativeInt = Field(
        _POLICY_DEFAULTS.protect,
        description="Tokens of the newest tool outputs that prune never touches.",
    )
    prune_minimum: NonNegativeInt = Field(
        _POLICY_DEFAULTS.minimum,
        description="Prune only when more than this many tokens would be freed.",
    )
    prune_protected_tools: list[str] = Field(
        default_factory=lambda: list(_POLICY_DEFAULTS.exclude_tools),
        description="Tools whose outputs are never pruned (environment: a JSON list).",
    )
    prune_continue_past_compacted: bool = Field(
        False,
        description="Keep scanning back past an output that is already pruned "
        "(OpenCode stops there).",
    )

    # --- estimates
    estimate_method: EstimateMethod = Field(
        "opencode",
        description="Token estimate: 'opencode' (UTF-16 length / 4, rounded), "
        "'ceil-bytes' (UTF-8 bytes / 4, rounded up), or a tokenizer family's fitted "
        "estimate: o200k, cl100k, llama3, qwen, tekken, deepseek, each also "
        "'<family>-conservative' (docs/estimators.md); or '<family>-exact', the "
        "family's exact counts (read from Transcript.count / ingest --count's columns).",
    )
    message_overhead: NonNegativeInt = Field(
        4, description="Tokens added per message for the role and framing."
    )

    # --- overflow (mirrors overflow.OverflowOptions)
    output_token_max: NonNegativeInt = Field(
        32_000,
        description="Most tokens reserved for the answer: usable input is "
        "context - min(model output limit or this, this).",
    )
    reserved: int | Literal["default"] | None = Field(
        None,
        description="Headroom taken off a model's input limit when it has one: "
        "a token count, 'default' (min(20000, output reserve)) or unset (none).",
    )
    inclusive: bool = Field(
        False,
        description="Overflow when the count reaches the usable window (>=), not only above it.",
    )
    count_cache_write: bool = Field(
        False, description="Count cache-write tokens in the overflow count."
    )
    clamp_usable: bool = Field(False, description="Clamp a negative usable window to 0.")

    # --- proactive budget (seeds 001/004)
    proactive_threshold: Share = Field(
        0.80,
        description="Share of the available window at which compaction starts "
        "(below critical_threshold).",
    )
    critical_threshold: Share = Field(
        0.95,
        description="Share of the available window at which compaction is urgent, even mid-turn.",
    )
    system_reserve: NonNegativeInt = Field(
        0, description="Tokens kept for the system prompt and tool definitions."
    )
    safety_buffer: NonNegativeInt = Field(
        0, description="Extra tokens kept free when computing the available window."
    )

    # --- split-point family: the recent tail kept verbatim
    keep_policy: Literal["tokens", "messages"] = Field(
        "tokens",
        description="How the recent tail kept verbatim is sized: by 'tokens' "
        "(keep_ratio) or 'messages' (keep_messages).",
    )
    keep_ratio: float = Field(
        0.40,
        gt=0,
        lt=1,
        description="Share of the usable window kept verbatim (keep_policy 'tokens').",
    )
    keep_messages: int = Field(
        10, ge=1, description="Newest messages kept verbatim (keep_policy 'messages')."
    )

    # --- tuning (ctxcompact.tuning.replay)
    prices: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Per-model prices in USD per million tokens ({model: {input, output, "
        "cached_input, cache_write}}) added to or replacing the shipped table, by exact model "
        "name (a dated snapshot needs its own entry); without cached_input a model has no "
        "cache discount, without cache_write it writes at the input price (docs/config.md, "
        "Prices).",
    )

    # --- summary generation
    summary_model: str | None = Field(
        None, description="Model that writes summaries (unset: the session's model)."
    )
    summary_max_tokens: int = Field(
        4096,
        ge=1,
        description="Most tokens a summary may take; kept free of the summarizer's window when "
        "its request is cut to fit.",
    )
    summary_temperature: float | None = Field(
        None,
        ge=0,
        le=2,
        description="Sampling temperature of the summary call (unset: the client's).",
    )
    system_prompt: str | None = Field(
        None, description="System prompt of the summary agent (unset: the built-in one)."
    )
    summary_prompt: str | None = Field(
        None, description="Final request that asks for the summary (unset: the built-in one)."
    )
    summary_template: Literal["free", "structured"] = Field(
        "free", description="Summary shape: 'free' text or a 'structured' template."
    )
    fallback: Literal["digest", "truncate", "raise"] = Field(
        "digest",
        description="When the summary call fails: a deterministic 'digest', "
        "'truncate' the history, or 'raise' SummaryError.",
    )
    timeout_s: float = Field(
        120.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds a summary call may take, retries included (sync and async); "
        "also the SDK timeout of the built-in clients unless given to the client.",
    )
    max_retries: NonNegativeInt = Field(
        2,
        description="Retries of a failed summary call by the built-in clients' SDKs "
        "(a max_retries= given to the client itself wins).",
    )

    # --- lifecycle
    max_attempts: int = Field(
        3,
        ge=1,
        description="Compactions in a row that may leave a session over its limit "
        "before CompactionLoopError.",
    )
    auto_continue: bool = Field(
        True,
        description="After an automatic compaction, add a user turn asking the agent to go on.",
    )
    continue_text: str = Field(
        "Continue if you have next steps",
        min_length=1,
        description="Text of that continue turn; after a user turn the model has not answered "
        "yet (a proactive compaction), the turn repeats that request instead.",
    )

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    def __init__(self, *, _origins: Mapping[str, str] | None = None, **values: Any) -> None:
        # Every invalid value, from any source, is a ConfigError that names where
        # it came from (an argument, an environment variable or a file).
        origins = {k: _origins.get(k, ARGUMENT) if _origins else ARGUMENT for k in values}
        _check_environment_names()
        for env, _ in _KILL_SWITCHES:
            _switched_on(env)  # raised here: pydantic would wrap it in a ValidationError
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise _config_error(e, origins, values) from None
        except SettingsError as e:
            raise _settings_error(e) from None
        environment = _environment()  # one pass over os.environ, not one per field
        for name in type(self).model_fields:
            origin = origins.get(name)
            if origin is None:
                origin = f"environment {env_var(name)}" if env_var(name) in environment else DEFAULT
            self._sources[name] = origin
        for env, name in _KILL_SWITCHES:
            if _switched_on(env):
                self._sources[name] = f"environment {env}"

    def __setattr__(self, name: str, value: Any) -> None:
        # Assignment is validated too: its error is a ConfigError as well.
        if name.startswith("_"):
            super().__setattr__(name, value)
            return
        try:
            super().__setattr__(name, value)
        except ValidationError as e:
            raise _config_error(e, {name: ARGUMENT}, {name: value}) from None
        self._sources[name] = ARGUMENT

    def sources(self) -> dict[str, str]:
        """Where each field's value came from: ``default``, ``argument``,
        ``environment CTXCOMPACT_...`` or ``file <path>``."""
        return dict(self._sources)

    @model_validator(mode="before")
    @classmethod
    def _disable_switches(cls, data: Any) -> Any:
        # OpenCode-style kill switches win over everything else.
        if isinstance(data, dict):
            for env, field in _KILL_SWITCHES:
                if _switched_on(env):
                    data = {**data, field: False}
        return data

    @field_validator("continue_text")
    @classmethod
    def _continue_text_has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("continue_text must have text (not only whitespace): the model "
                             "would get an empty user turn")  # fmt: skip
        return value

    @field_validator("policy", mode="before")
    @classmethod
    def _load_policy(cls, value: Any) -> Any:
        return value if isinstance(value, Policy) else Policy.load(value)

    @field_validator("prices")
    @classmethod
    def _check_prices(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        # Checked here, not when a model is priced: the error then names the
        # file or variable the table came from.
        from ctxcompact.tuning.prices import Price

        for model, price in value.items():
            Price.coerce(price, model=model)
        return value

    def masks_at(self) -> Literal["call", "turn"] | None:
        """When the lifecycle prunes without a summary: before every model call
        (``mask_first``, or a policy that acts per call), when a user turn ends
        (a policy that acts on turns: over the history before the next user
        message), or never (``None``: pruning is off, or the policy acts only
        as a summary runs). The live loop, the replay engine and the walk read it."""
        if not self.prune:
            return None
        if self.mask_first:
            return "call"
        acts = self.policy.acts
        return None if acts == "summary" else acts

    def prune_policy(self) -> Policy:
        """The policy prune runs: ``policy``, with OpenCode's prune fields
        (``prune``, ``prune_protect``, ...) applied where they were set."""
        set_here = {
            name: getattr(self, name)
            for name in PRUNE_FIELDS
            if self._sources.get(name, DEFAULT) != DEFAULT
        }
        try:
            return with_prune_fields(self.policy, set_here)
        except ConfigError as e:  # a value the policy refuses (one too large): say where from
            name = next((n for n, option in PRUNE_FIELDS.items() if option == e.column), None)
            if name not in set_here:
                raise
            raise ConfigError(
                f"{self._sources[name]}: invalid {name}={set_here[name]!r} ({e})", column=name
            ) from None

    def with_policy(self, policy: Policy) -> CompactionConfig:
        """A copy that prunes by exactly ``policy``: OpenCode's prune fields
        set here (``prune_protect``, ``prune_minimum``, ...) are not applied to
        it, they now hold its values (``prune_policy()`` is ``policy``). The
        ``prune`` switch stays: pruning switched off stays off."""
        knobs = {name: getattr(policy, option) for name, option in PRUNE_FIELDS.items()
                 if name != "prune"}  # fmt: skip
        copy = self.model_copy(update={"policy": policy, **knobs})
        # model_copy shares the private dict: give the copy its own.
        sources = {**self._sources, "policy": ARGUMENT, **dict.fromkeys(knobs, DEFAULT)}
        if self.prune:  # prune = true is the default: it must not override policy.enabled
            sources["prune"] = DEFAULT
        copy._sources = sources
        return copy

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # OpenCode's prune fields are written only where they were set: loading
        # a dump sets every field it holds, and a default written out would
        # then override the policy it came with (prune_policy).
        data: dict[str, Any] = handler(self)
        for name in PRUNE_FIELDS:
            if self._sources.get(name, DEFAULT) == DEFAULT:
                data.pop(name, None)
        return data

    @model_validator(mode="after")
    def _ordered_thresholds(self) -> CompactionConfig:
        if not self.proactive_threshold < self.critical_threshold:
            raise ValueError(
                f"proactive_threshold ({self.proactive_threshold}) must be below "
                f"critical_threshold ({self.critical_threshold})"
            )
        return self

    @classmethod
    def load(cls, **values: Any) -> CompactionConfig:
        """Defaults < environment < ``values``; invalid input raises ``ConfigError``."""
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> CompactionConfig:
        """Load a TOML or JSON file (a ``[compaction]`` table or top-level keys).

        Environment variables override the file; ``overrides`` override both.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read the configuration: {e}") from None
        if path.suffix not in (".toml", ".json"):
            raise ConfigError(f"{path}: a configuration file is .toml or .json, "
                              f"not {path.suffix or 'without a suffix'}")  # fmt: skip
        try:
            data: Any = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except ValueError as e:
            raise ConfigError(f"{path}: not valid {path.suffix.lstrip('.')}: {e}") from None
        if isinstance(data, dict) and isinstance(data.get("compaction"), dict):
            # Settings beside the table would be dropped: the table is what is read.
            if stray := sorted(k for k in data if k != "compaction" and k in cls.model_fields):
                raise ConfigError(
                    f"{path}: {stray[0]} is outside the [compaction] table, which is what is "
                    "read: move it into the table",
                    column=stray[0],
                )
            data = data["compaction"]
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a table of settings")
        if isinstance(data.get("policy"), str):
            data = {**data, "policy": _policy_beside(path, data["policy"])}
        # Environment beats the file: drop file keys that an env var sets.
        env = {k for k in cls.model_fields if f"CTXCOMPACT_{k.upper()}" in os.environ}
        values = {k: v for k, v in data.items() if k not in env}
        origins = {k: f"file {path}" for k in values}
        return cls(_origins=origins, **{**values, **overrides})


def _policy_beside(config: Path, spec: str) -> str:
    """A policy file named by a relative path in the configuration file
    ``config`` is found from that file's folder (as a file it names is read
    where the file is, wherever the command runs); a preset name or JSON
    text is returned as it is."""
    from ctxcompact.policy import PRESETS

    text = spec.strip()
    if text in PRESETS or text.startswith("{") or Path(text).is_absolute():
        return spec
    beside = config.parent / text
    if text.endswith((".toml", ".json")) or beside.is_file():
        return str(beside)
    return spec


ARGUMENT = "argument"
DEFAULT = "default"
_KILL_SWITCHES = (
    ("CTXCOMPACT_DISABLE_AUTOCOMPACT", "auto"),
    ("CTXCOMPACT_DISABLE_PRUNE", "prune"),
)


def with_prune_fields(policy: Policy, values: Mapping[str, Any]) -> Policy:
    """``policy`` with OpenCode's prune fields in ``values`` (``prune_protect``...)
    applied to the options they set."""
    updates = {PRUNE_FIELDS[name]: value for name, value in values.items() if name in PRUNE_FIELDS}
    return Policy.from_mapping({**policy.model_dump(), **updates}) if updates else policy


#: ``CTXCOMPACT_*`` variables read elsewhere than a field: the kill switches,
#: the test Postgres binaries (``tests/support/postgres.py``), and the benches' and
#: tests' own settings.
OTHER_ENV_VARS = frozenset(
    {
        *(env for env, _ in _KILL_SWITCHES),
        "CTXCOMPACT_PG_BINDIR",
        "CTXCOMPACT_BENCH_SESSIONS",
        "CTXCOMPACT_ARTIFACTS",
    }
)


def _check_environment_names() -> None:
    """A ``CTXCOMPACT_*`` variable that sets nothing is a misspelt setting:
    pydantic-settings ignores unknown names, so it would be dropped silently."""
    known = {env_var(name) for name in CompactionConfig.model_fields} | OTHER_ENV_VARS
    for key in sorted(_environment()):
        if not key.startswith("CTXCOMPACT_") or key in known:
            continue
        # Compared without the shared prefix, which would make every name close.
        names = {k.removeprefix("CTXCOMPACT_"): k for k in known}
        close = difflib.get_close_matches(key.removeprefix("CTXCOMPACT_"), sorted(names), n=1)
        hint = f"; did you mean {names[close[0]]}?" if close else ""
        raise ConfigError(
            f"environment variable {key} is not a ctxcompact setting{hint} (the settings are "
            "CTXCOMPACT_<FIELD> for a CompactionConfig field; docs/config.md lists them)",
            column=key,
        )


def default(field: str) -> Any:
    """A field's built-in default (never the environment's): the one place each
    default is written, read by the scans when no config is given."""
    return CompactionConfig.model_fields[field].get_default(call_default_factory=True)


def env_var(field: str) -> str:
    """The environment variable that sets ``field``."""
    return f"CTXCOMPACT_{field.upper()}"


def _environment() -> dict[str, str]:
    # pydantic-settings matches names case-insensitively; so do we.
    return {key.upper(): value for key, value in os.environ.items()}


def _env_value(field: str) -> str | None:
    return _environment().get(env_var(field))


def _config_error(
    error: ValidationError, origins: Mapping[str, str], values: Mapping[str, Any]
) -> ConfigError:
    problems = []
    fields = []
    for e in error.errors():
        field = ".".join(str(p) for p in e["loc"])
        fields.append(field or "configuration")
        name = str(e["loc"][0]) if e["loc"] else ""
        origin = origins.get(name)
        raw = _env_value(name) if name else None
        if not name:
            where = "configuration: invalid"
        elif origin is None and raw is not None:
            where = f"environment variable {env_var(name)}={raw!r}: invalid {field}"
        elif origin is not None and origin.startswith("file "):
            where = f"{origin[5:]}: invalid {field}"
        elif name in values:
            where = f"configuration: invalid {field}={values[name]!r}"
        else:
            where = f"configuration: invalid {field}"
        problems.append(f"{where}: {e['msg'].removeprefix('Value error, ')}")
    return ConfigError("; ".join(problems), column=fields[0])


def _settings_error(error: SettingsError) -> ConfigError:
    # pydantic-settings fails before validation on a complex field whose
    # environment value is not JSON; its message names the field.
    match = re.search(r'field "([^"]+)"', str(error))
    if match is None:
        return ConfigError(f"configuration: {error}")
    name = match.group(1)
    example = _JSON_EXAMPLES.get(name)
    return ConfigError(
        f"environment variable {env_var(name)}={_env_value(name)!r}: invalid {name}: "
        f"expected JSON{f' (e.g. {example!r})' if example else ''}",
        column=name,
    )


#: What a complex field's environment value looks like, for its error.
_JSON_EXAMPLES = {
    "prune_protected_tools": '["skill", "todo"]',
    "prices": '{"my-model": {"input": 3.0, "output": 15.0}}',
}


def _type_name(annotation: Any) -> str:
    if annotation is Policy:
        return "preset, file or table"
    if get_origin(annotation) is Literal:
        return " | ".join(json.dumps(a) for a in get_args(annotation))
    if get_origin(annotation) in (UnionType, Union):
        return " | ".join(_type_name(a) for a in get_args(annotation))
    if get_origin(annotation) is list:
        return f"list[{_type_name(get_args(annotation)[0])}]"
    if annotation is type(None):
        return "null"
    return str(getattr(annotation, "__name__", annotation))


def format_value(value: Any) -> str:
    """A value as you would write it in a JSON/TOML file or an environment variable."""
    if isinstance(value, Policy):  # a preset by its name, else its options
        value = value.name() or value.model_dump()
    return "(unset)" if value is None else json.dumps(value, ensure_ascii=False)


def fields() -> list[dict[str, str]]:
    """One row per ``CompactionConfig`` field: name, type (with its bounds),
    default, environment variable and meaning."""
    rows = []
    for name, info in CompactionConfig.model_fields.items():
        kind = _type_name(info.annotation)
        bounds = [
            f"{op} {getattr(m, attr)}"
            for m in info.metadata
            for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
            if getattr(m, attr, None) is not None
        ]
        rows.append({
            "field": name,
            "type": f"{kind} ({', '.join(bounds)})" if bounds else kind,
            "default": format_value(info.get_default(call_default_factory=True)),
            "environment": env_var(name),
            "meaning": info.description or "",
        })  # fmt: skip
    return rows


def reference_markdown() -> str:
    """The field table of docs/config.md (``ctxcompact config --markdown``)."""
    lines = [
        "| field | type | default | environment variable | meaning |",
        "|---|---|---|---|---|",
    ]
    for row in fields():
        cells = [f"`{row['field']}`", row["type"], f"`{row['default']}`",
                 f"`{row['environment']}`", row["meaning"]]  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["CompactionConfig", "env_var", "fields", "format_value", "reference_markdown"]
