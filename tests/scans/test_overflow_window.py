"""The usable window and the proactive budget: one definition, the core's."""

from __future__ import annotations

import pytest
from ctxcompact.config import CompactionConfig
from ctxcompact.scans import Limits, TokenBudget, check_overflow
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sweeps import sweep


@settings(max_examples=sweep(200), deadline=None)
@given(
    st.integers(0, 2_000_000), st.integers(0, 300_000), st.integers(0, 200_000),
    st.sampled_from([None, 0, 5_000, "default"]), st.booleans(),
)  # fmt: skip
def test_limits_usable_is_the_cores_window(
    context: int, input_limit: int, output: int, reserved: object, clamp: bool
) -> None:
    cfg = CompactionConfig(reserved=reserved, clamp_usable=clamp)
    lim = Limits(context=context, input=input_limit, output=output)
    if context == 0:
        assert lim.usable(cfg) is None
        return
    want = check_overflow({"input": 0, "output": 0}, lim, cfg).usable
    assert lim.usable(cfg) == want
    assert lim.reserve(cfg) == min(output or cfg.output_token_max, cfg.output_token_max)


def test_the_budget_of_limits_leaves_the_usable_window_for_system_and_history() -> None:
    cfg = CompactionConfig(system_reserve=1_000, safety_buffer=500)
    budget = TokenBudget.for_limits({"context": 100_000, "output": 8_000}, history_tokens=10,
                                    system_tokens=200, config=cfg)  # fmt: skip
    assert budget is not None
    assert budget.available == 100_000 - 8_000 - 1_200 - 500
    # With an input limit, the window is the input limit, whatever the context.
    budget = TokenBudget.for_limits({"context": 400_000, "input": 272_000, "output": 128_000},
                                    history_tokens=10, config=cfg)  # fmt: skip
    assert budget is not None and budget.available == 272_000 - 1_000 - 500
    assert TokenBudget.for_limits({"context": 0}, history_tokens=10, config=cfg) is None


@pytest.mark.parametrize(("policy", "keep"), [("tokens", None), ("sizes", 5)])
def test_a_bad_keep_policy_is_a_config_error(policy: str, keep: int | None) -> None:
    from ctxcompact.errors import ConfigError
    from ctxcompact.live import select_split

    with pytest.raises(ConfigError, match=r"keep_policy|keep_tokens"):
        select_split([{"role": "user", "content": "x"}], keep_policy=policy, keep_tokens=keep)


def test_overflow_options_are_the_configs_overflow_fields() -> None:
    from dataclasses import fields

    from ctxcompact.config import default
    from ctxcompact.scans import OverflowOptions

    cfg = CompactionConfig(output_token_max=1_000, inclusive=True, reserved="default")
    opts = OverflowOptions.from_config(cfg)
    for f in fields(OverflowOptions):
        assert f.default == default(f.name), f.name
        assert getattr(opts, f.name) == getattr(cfg, f.name), f.name


def test_scans_without_a_config_use_the_configs_builtin_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ctxcompact.config import default
    from ctxcompact.scans import parts

    # The environment configures CompactionConfig(), never the no-config defaults.
    monkeypatch.setenv("CTXCOMPACT_PRUNE_PROTECT", "7")
    assert parts._opt(None, "prune_protect") == default("prune_protect") == 40_000
    assert parts._opt(None, "prune_protected_tools") == ["skill"]
    assert parts._opt(CompactionConfig(), "prune_protect") == 7
