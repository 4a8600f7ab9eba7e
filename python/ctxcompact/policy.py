"""What prune may clear: one typed, serializable policy the Rust scans take.

OpenCode's rule is the default; the other options are the ones peers use on
long autonomous runs (docs/policies.md says where each preset's numbers come
from). A policy is data: build it in code, load it from TOML/JSON, name a
preset, or set ``CTXCOMPACT_POLICY`` (a preset name, a file path or JSON).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ctxcompact.errors import ConfigError

#: The largest values the core's integers hold (u64 token counts, u32 turn
#: and message counts): a larger one is a ConfigError naming the option and
#: where it came from, not an overflow when a scan starts.
U64 = 2**64 - 1
U32 = 2**32 - 1
#: An option's type by what it counts: tokens (u64), or turns, messages
#: and calls (u32); a price as a multiple of the input price.
Tokens = Annotated[int, Field(ge=0, le=U64)]
Count = Annotated[int, Field(ge=0, le=U32)]
Ratio = Annotated[float, Field(ge=0, le=1_000, allow_inf_nan=False)]


class Policy(BaseModel):
    """Which old tool outputs a prune clears (marks compacted; never deletes).

    The walk goes from the newest message back. Messages newer than the
    ``protect_turns``-th newest *turn* (a user message, or an assistant step)
    are never touched; a summary ends the walk. Of the completed tool outputs
    it counts, newest first, an output is cleared when it is beyond the
    ``protect`` token window **and** beyond the ``keep_recent`` newest (per
    tool when ``keep_recent_per_tool``); a superseded output (``supersede``)
    is cleared first. The result stands only if it frees more than
    ``minimum`` and at least ``clear_at_least`` tokens, and only in a session
    whose visible context is above ``trigger`` tokens, and with ``cache_aware``
    only when it pays under the prompt cache's prices (``cache_read``,
    ``cache_write``, ``expected_calls``: docs/policies.md). Outputs of fewer than
    ``min_output_tokens`` tokens, and parts marked ``pinned``, are never cleared.

    The last four options say how the model input shows old parts
    (``to_model_messages(..., policy=)`` and the estimates agree): a cleared
    call's arguments (``clear_inputs``), a cleared output's placeholder
    (``placeholder``), an oversized output cut to head and tail
    (``truncate_output``), the reasoning of recent steps (``keep_thinking``).
    What is stored is never changed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="Prune at all.")
    acts: Literal["turn", "call", "summary"] = Field(
        "turn",
        description="When it prunes without a summary asking: 'turn' when a user turn ends "
        "(OpenCode prunes as its agent loop exits; the prune reads the history before the "
        "next user message), 'call' before every model call (SWE-agent's history "
        "processor; Anthropic's context editing, whose trigger is checked at each call), "
        "'summary' only as a summary runs. mask_first makes any policy act at every call.",
    )
    turn: Literal["user", "step"] = Field(
        "user",
        description="Turn unit of protect_turns: a 'user' message (OpenCode) or an "
        "assistant 'step' (one model call of an autonomous run).",
    )
    protect_turns: Count = Field(
        2,
        description="Messages newer than the N-th newest turn are never touched "
        "(OpenCode: 2 user turns, the newest exchange).",
    )
    protect: Tokens = Field(
        40_000, description="Tokens of the newest counted tool outputs never cleared."
    )
    minimum: Tokens = Field(
        20_000, description="Act only when more than this many tokens are freed."
    )
    clear_at_least: Tokens = Field(
        0, description="Act only when at least this many tokens are freed."
    )
    trigger: Tokens = Field(
        0,
        description="Act only in a session whose visible context (estimated model input "
        "from the pivot on) is above this many tokens; 0 = always.",
    )
    # Optional counts keep their bounds here: ``int | None`` is what the
    # search takes a range of (``tuning.search.load_space``).
    keep_recent: int | None = Field(
        None,
        ge=0,
        le=U32,
        description="Keep the N newest counted tool outputs whatever their size.",
    )
    keep_recent_per_tool: bool = Field(
        False, description="Count keep_recent per tool instead of over all tools."
    )
    exclude_tools: list[str] = Field(
        default_factory=lambda: ["skill"], description="Tools whose outputs are never cleared."
    )
    supersede: bool = Field(
        False,
        description="Clear first an output a newer call made stale: the same file path "
        "(any tool), or the same command of the same tool.",
    )
    continue_past_compacted: bool = Field(
        False,
        description="Walk past an output that is already cleared (OpenCode stops there).",
    )
    min_output_tokens: Tokens = Field(
        0,
        description="Never clear an output of fewer tokens (its placeholder costs about 8).",
    )
    # --- how cleared and oversized tool parts are sent (the store keeps them whole) ---
    clear_inputs: bool = Field(
        False,
        description="Send a cleared call's arguments as {} too (Anthropic's clear_tool_inputs).",
    )
    truncate_output: int | None = Field(
        None,
        ge=0,
        le=U64,
        description="Send an output longer than 4 x N characters (about N tokens) as its first "
        "and last 2 x N characters around a marker saying how many were cut; pinned parts "
        "are never cut.",
    )
    keep_thinking: Count = Field(
        0,
        description="Send the reasoning of the newest N assistant messages (as "
        "reasoning_content, which DeepSeek, vLLM and OpenRouter read); older reasoning is "
        "cleared. 0: reasoning is never sent (OpenCode's chat view).",
    )
    placeholder: Literal["opencode", "describe"] = Field(
        "opencode",
        description="A cleared output's placeholder: OpenCode's constant, or 'describe' "
        "(names the tool, its target, the size, and the part id to recall).",
    )

    # --- whether a clear is worth the prompt cache it breaks ---
    cache_aware: bool = Field(
        False,
        description="Clear only when the tokens saved over the calls still to come, at the "
        "cache-read price, are worth more than writing again the prompt after the first "
        "cleared output (docs/policies.md); the selection grows until then.",
    )
    cache_read: Ratio = Field(
        0.1,
        description="cache_aware: a cache read's price as a multiple of the input price "
        "(Anthropic 0.1, gpt-4o 0.5, gpt-4.1 0.25, no cache 1). Replay and tune set it "
        "from their first price sheet.",
    )
    cache_write: Ratio = Field(
        1.25,
        description="cache_aware: a prompt token not read from the cache, as a multiple of "
        "the input price (Anthropic's 5-minute cache 1.25, OpenAI 1, no cache 1); at least "
        "cache_read. Replay and tune set it from their first price sheet.",
    )
    expected_calls: Count = Field(
        0,
        description="cache_aware: the model calls of a whole run (a corpus statistic); the "
        "calls still to come are that less the calls so far (at least 1). 0: as many more "
        "as so far.",
    )

    @field_validator("cache_write")
    @classmethod
    def _write_at_least_read(cls, value: float, info: ValidationInfo) -> float:
        read = info.data.get("cache_read")
        if read is not None and value < read:
            raise ValueError(f"a cache write ({value:g}) costs at least a cache read ({read:g})")
        return value

    def with_cache_prices(self, read: float, write: float) -> Policy:
        """This policy with the cache gate's prices set (a price sheet's, as
        ``tuning.cache.Sheet.cache_ratios`` gives them); unchanged when the
        gate is off."""
        if not self.cache_aware:
            return self
        return Policy.from_mapping({**self.model_dump(), "cache_read": read,
                                    "cache_write": write}, where="cache prices")  # fmt: skip

    @classmethod
    def preset(cls, name: str) -> Policy:
        """A named preset (``PRESETS``); ``ConfigError`` for an unknown name."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ConfigError(
                f"unknown policy preset {name!r}; one of {', '.join(PRESETS)}", column="policy"
            ) from None

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        """A policy from a TOML or JSON file: its options at the top level or in a
        ``[policy]`` table; ``preset = "<name>"`` starts from a preset."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read the policy: {e}", column="policy") from None
        try:
            data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except ValueError as e:
            kind = "TOML" if path.suffix == ".toml" else "JSON"
            raise ConfigError(f"{path}: not valid {kind}: {e}", column="policy") from None
        if isinstance(data, dict) and isinstance(data.get("policy"), dict):
            data = data["policy"]
        return cls.from_mapping(data, where=str(path))

    @classmethod
    def from_mapping(cls, data: Any, *, where: str = "policy") -> Policy:
        """A policy from a dict of options (``preset`` names a starting preset)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a table of policy options", column="policy")
        options = dict(data)
        try:
            base = cls.preset(str(options.pop("preset"))) if "preset" in options else cls()
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}", column="preset") from None
        try:
            return cls.model_validate({**base.model_dump(), **options})
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(x) for x in first["loc"]) or "policy"
            at = f"{where}: " if where else ""
            raise ConfigError(
                f"{at}invalid policy option {field}: {first['msg']}", column=field
            ) from None

    @classmethod
    def load(cls, spec: Policy | str | Path | Mapping[str, Any]) -> Policy:
        """A policy from anything a user may hand over: a ``Policy``, a preset
        name, a path to a TOML/JSON file, JSON text, or a dict of options."""
        if isinstance(spec, Policy):
            return spec
        if isinstance(spec, Mapping):
            return cls.from_mapping(spec)
        if isinstance(spec, Path):
            return cls.from_file(spec)
        if not isinstance(spec, str):
            raise ConfigError(
                f"a policy is a preset name, a file, a dict or a Policy, got {type(spec).__name__}",
                column="policy",
            )
        text = spec.strip()
        if text in PRESETS:
            return PRESETS[text]
        if text.startswith("{"):
            try:
                data = json.loads(text)
            except ValueError as e:
                raise ConfigError(f"policy: not valid JSON: {e}", column="policy") from None
            return cls.from_mapping(data)
        if text.endswith((".toml", ".json")) or Path(text).is_file():
            return cls.from_file(text)
        if Path(text).suffix or "/" in text or os.sep in text:  # a path, not a preset's name
            raise ConfigError(
                f"policy {text!r} is neither a preset ({', '.join(PRESETS)}) nor an existing "
                "policy file (.toml or .json)",
                column="policy",
            )
        return cls.preset(text)

    def scan_options(self, *, method: str = "opencode", overhead: int = 4) -> dict[str, Any]:
        """The options of the native scans (``_core.prune`` / ``compact_batch``)."""
        options = self.model_dump()
        options["protected_tools"] = options.pop("exclude_tools")
        options.pop("acts")  # when it runs is the caller's (the engine is told apart)
        return {**options, "method": method, "overhead": overhead}

    def render_options(self) -> dict[str, Any]:
        """The rendering options of the native estimate (``_core.estimate_messages``)."""
        return {
            "clear_inputs": self.clear_inputs,
            "truncate_output": self.truncate_output,
            "placeholder": self.placeholder,
            "keep_thinking": self.keep_thinking,
        }

    def to_toml(self) -> str:
        """Every option under ``[policy]``, as ``from_file`` reads it back
        (an option that is ``None`` is left out: its default is ``None``)."""
        lines = ["[policy]"]
        for key, value in self.model_dump().items():
            if value is None:
                continue
            # JSON's true/false, integers, strings and lists of strings are TOML's
            lines.append(f"{key} = {json.dumps(value)}")
        return "\n".join(lines) + "\n"

    def name(self) -> str | None:
        """The preset this policy is, if any."""
        return next((n for n, p in PRESETS.items() if p == self), None)

    def describe(self) -> str:
        """A label that says what this policy is: its preset's name, else the
        nearest preset and the options that differ from it
        (``opencode+protect=1000,minimum=500``)."""
        if (name := self.name()) is not None:
            return name
        mine = self.model_dump()
        changes = {
            preset: {k: v for k, v in mine.items() if v != options[k]}
            for preset, options in ((n, p.model_dump()) for n, p in PRESETS.items())
        }
        preset = min(changes, key=lambda n: len(changes[n]))  # the first on a tie
        return preset + "+" + ",".join(f"{k}={json.dumps(v)}" for k, v in changes[preset].items())


#: What the history processors that act before every model call share
#: (SWE-agent's, Anthropic's context editing): each step is a turn, and no
#: turn, token window, minimum or tool is protected beyond ``keep_recent``.
_EVERY_CALL: dict[str, Any] = {
    "acts": "call",
    "turn": "step",
    "protect_turns": 0,
    "protect": 0,
    "minimum": 0,
    "exclude_tools": [],
}

#: Named presets; docs/policies.md gives the source of every number.
PRESETS: dict[str, Policy] = {
    # OpenCode's session/compaction.ts: PRUNE_PROTECT 40k, PRUNE_MINIMUM 20k,
    # the skill tool protected, the newest two user turns skipped; pruned as
    # the agent loop exits, when a user turn ends (acts="turn").
    "opencode": Policy(),
    # SWE-agent's default history processor: the last 5 observations are kept,
    # every older one is elided, at every step.
    "swe-agent": (_SWE_AGENT := Policy(**_EVERY_CALL, keep_recent=5)),
    # Anthropic's clear_tool_uses_20250919 defaults: trigger at 100k input
    # tokens, keep the 3 newest tool uses, no clear_at_least, no exclusions;
    # the API checks the trigger on every request.
    "anthropic-clear-tool-uses": Policy(**_EVERY_CALL, trigger=100_000, keep_recent=3),
    # Ours, for small windows: stale outputs first, then everything but the two
    # newest steps (protect_turns=3: what is newer than the third newest step)
    # and the 2 newest outputs of each tool; outputs under 16
    # tokens stay (their placeholder would cost about as much). It walks past
    # cleared outputs: an output kept as one of its tool's newest, or not yet
    # superseded, can sit behind one cleared since, and stopping there would
    # keep it forever (the result would depend on when earlier rounds ran).
    "aggressive": Policy(
        acts="summary",
        turn="step",
        protect_turns=3,
        protect=0,
        minimum=0,
        keep_recent=2,
        keep_recent_per_tool=True,
        supersede=True,
        exclude_tools=["skill"],
        min_output_tokens=16,
        continue_past_compacted=True,
    ),
    # Ours: SWE-agent's selection, acted on only when it pays under the prompt
    # cache's prices (Anthropic's 5-minute cache unless a sheet sets them;
    # replay sets them from its first --price). docs/policies.md derives the
    # rule; 12 calls a run is the mean of the shared corpora (docs/tuning.md).
    "cache-aware": Policy(**{**_SWE_AGENT.model_dump(), "cache_aware": True, "expected_calls": 12}),
}

__all__ = ["PRESETS", "Policy"]
