"""One configuration for every compaction decision.

Defaults reproduce OpenCode. Values come from (highest first) keyword
arguments, ``CTXCOMPACT_*`` environment variables, a TOML/JSON file, and the
defaults. ``CTXCOMPACT_DISABLE_AUTOCOMPACT`` and ``CTXCOMPACT_DISABLE_PRUNE``
mirror OpenCode's ``OPENCODE_DISABLE_*`` switches.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ctxcompact.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}


class CompactionConfig(BaseSettings):
    """Every knob of estimate, overflow, prune, summary and lifecycle."""

    model_config = SettingsConfigDict(
        env_prefix="CTXCOMPACT_", extra="forbid", validate_assignment=True
    )

    # --- switches (OpenCode's compaction.auto / compaction.prune)
    auto: bool = True
    prune: bool = True

    # --- prune (soft compaction)
    prune_protect: int = Field(40_000, ge=0)
    prune_minimum: int = Field(20_000, ge=0)
    prune_protected_tools: list[str] = Field(default_factory=lambda: ["skill"])
    prune_continue_past_compacted: bool = False

    # --- estimates
    estimate_method: Literal["opencode", "ceil-bytes"] = "opencode"
    message_overhead: int = Field(4, ge=0)

    # --- overflow (mirrors overflow.OverflowOptions)
    output_token_max: int = Field(32_000, ge=0)
    reserved: int | Literal["default"] | None = None
    inclusive: bool = False
    count_cache_write: bool = False
    clamp_usable: bool = False

    # --- proactive budget (seeds 001/004)
    proactive_threshold: float = Field(0.80, gt=0, le=1)
    critical_threshold: float = Field(0.95, gt=0, le=1)
    system_reserve: int = Field(0, ge=0)
    safety_buffer: int = Field(0, ge=0)

    # --- split-point family: the recent tail kept verbatim
    keep_policy: Literal["tokens", "messages"] = "tokens"
    keep_ratio: float = Field(0.40, gt=0, lt=1)
    keep_messages: int = Field(10, ge=1)

    # --- summary generation
    summary_model: str | None = None
    summary_max_tokens: int = Field(4096, ge=1)
    summary_temperature: float | None = Field(None, ge=0, le=2)
    system_prompt: str | None = None
    summary_prompt: str | None = None
    summary_template: Literal["free", "structured"] = "free"
    fallback: Literal["digest", "truncate", "raise"] = "digest"
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(2, ge=0)

    # --- lifecycle
    max_attempts: int = Field(3, ge=1)
    auto_continue: bool = True
    continue_text: str = "Continue if you have next steps"

    @model_validator(mode="before")
    @classmethod
    def _disable_switches(cls, data: Any) -> Any:
        # OpenCode-style kill switches win over everything else.
        if isinstance(data, dict):
            for env, field in (
                ("CTXCOMPACT_DISABLE_AUTOCOMPACT", "auto"),
                ("CTXCOMPACT_DISABLE_PRUNE", "prune"),
            ):
                if os.environ.get(env, "").strip().lower() in _TRUE:
                    data = {**data, field: False}
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
        try:
            return cls(**values)
        except ValidationError as e:
            raise _config_error(e, source="configuration") from None

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
        try:
            data: Any = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except ValueError as e:
            raise ConfigError(
                f"{path}: not valid {path.suffix.lstrip('.') or 'JSON'}: {e}"
            ) from None
        if isinstance(data, dict) and isinstance(data.get("compaction"), dict):
            data = data["compaction"]
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a table of settings")
        # Environment beats the file: drop file keys that an env var sets.
        env = {k for k in cls.model_fields if f"CTXCOMPACT_{k.upper()}" in os.environ}
        values = {k: v for k, v in data.items() if k not in env}
        try:
            return cls(**{**values, **overrides})
        except ValidationError as e:
            raise _config_error(e, source=str(path)) from None


def _config_error(error: ValidationError, *, source: str) -> ConfigError:
    first = error.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "configuration"
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'configuration'}: {e['msg']}"
        for e in error.errors()
    )
    return ConfigError(f"{source}: invalid {problems}", column=field)


__all__ = ["CompactionConfig"]
