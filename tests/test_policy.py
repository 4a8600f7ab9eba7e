"""The prune policy as data: presets, files, environment, the config's
OpenCode fields, the CLI's --policy, and a ConfigError naming the field and
the file for every bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError
from ctxcompact.models import MessageWithParts, Session
from ctxcompact.policy import PRESETS, Policy


def step(i: int, part_id: str, tool: str, output: str, **input: Any) -> dict[str, Any]:
    """An assistant step answering the task with one completed tool call."""
    state = {"status": "completed", "input": input, "output": output}
    return {"info": {"id": f"a{i:04d}", "role": "assistant", "parentID": "task"},
            "parts": [{"id": part_id, "type": "tool", "tool": tool, "callID": f"c{part_id}",
                       "state": state}]}  # fmt: skip


def run_of(steps: list[dict[str, Any]]) -> Session:
    text = {"id": "p-task", "type": "text", "text": "fix the failing test"}
    task = {"info": {"id": "task", "role": "user"}, "parts": [text]}
    return Session.model_validate({"info": {"id": "run"}, "messages": [task, *steps]})


def autonomous_run(steps: int, chars: int = 4_000) -> Session:
    """One task, then ``steps`` assistant steps each with one bash output."""
    return run_of([step(i, f"t{i}", "bash", "x" * chars) for i in range(steps)])


def test_the_default_policy_is_opencodes_rule() -> None:
    assert Policy() == PRESETS["opencode"] == CompactionConfig().prune_policy()
    assert Policy().name() == "opencode"
    # Its numbers are the ones the config documents for OpenCode's fields.
    config = CompactionConfig()
    assert (config.prune_protect, config.prune_minimum, config.prune_protected_tools) == (
        Policy().protect,
        Policy().minimum,
        Policy().exclude_tools,
    )


def test_opencode_frees_nothing_on_an_autonomous_run_and_swe_agent_does() -> None:
    run = autonomous_run(30)
    assert cc.prune(run).pruned == 0
    assert cc.prune(run, CompactionConfig(prune_protect=1_000, prune_minimum=500)).pruned == 0
    masked = cc.prune(run, "swe-agent")
    assert len(masked) == 25  # every output but the five newest
    assert masked.pruned == 25 * 1_000
    marked = cc.mark_pruned(run, masked, now_ms=1)
    tools = [p for m in marked.messages for p in m.parts if p.type == "tool" and p.state]
    kept = {p.id for p in tools if not (p.state and p.state.time and p.state.time.compacted)}
    assert kept == {f"t{i}" for i in range(25, 30)}


def test_anthropic_preset_waits_for_its_trigger() -> None:
    assert cc.prune(autonomous_run(30), "anthropic-clear-tool-uses").pruned == 0  # ~30k tokens
    big = cc.prune(autonomous_run(120), "anthropic-clear-tool-uses")  # ~120k tokens
    assert len(big) == 117


def test_aggressive_preset_is_the_same_whenever_earlier_rounds_ran() -> None:
    """Masking step by step (what a live loop with mask_first does) clears
    what one round over the whole history clears: with per-tool counts an
    output still kept (B's first) sits behind ones cleared since (A's)."""
    order = ["A", "B", "A", "A", "A", "A", "B", "B", "B", "B", "B"]

    def call(i: int, tool: str) -> dict[str, Any]:
        state = {"status": "completed", "input": {"q": f"{tool}{i}"}, "output": "y" * 2000}
        return {"info": {"id": f"a{i:02d}", "role": "assistant", "parentID": "u"},
                "parts": [{"id": f"p{i:02d}", "type": "tool", "tool": tool, "callID": f"c{i}",
                           "state": state}]}  # fmt: skip

    user = {"info": {"id": "u", "role": "user"}, "parts": [{"id": "t", "type": "text"}]}
    steps = [call(i, t) for i, t in enumerate(order)]
    live = cc.Session.model_validate({"info": {"id": "r"}, "messages": [user]})
    for message in steps:  # one round before each new step
        cc.mark_pruned(live, cc.prune(live, "aggressive"))
        live.messages.append(MessageWithParts.model_validate(message))
    cc.mark_pruned(live, cc.prune(live, "aggressive"))
    whole = cc.Session.model_validate({"info": {"id": "r"}, "messages": [user, *steps]})
    cc.mark_pruned(whole, cc.prune(whole, "aggressive"))

    def cleared(s: cc.Session) -> list[str]:
        return [p.id for m in s.messages for p in m.parts if p.compacted]

    assert "p01" in cleared(whole)  # B's first: three newer B outputs
    assert cleared(live) == cleared(whole)


def test_aggressive_preset_clears_stale_reads_first() -> None:
    run = run_of([step(i, f"r{i}", "read", "x" * 4_000, filePath="a.py") for i in range(6)])
    result = cc.prune(run, "aggressive")
    # r5 is the newest read of a.py; every older read is stale, protected turns or not
    assert sorted(result.part_ids) == ["r0", "r1", "r2", "r3"]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_round_trips_as_data(name: str, tmp_path: Path) -> None:
    policy = Policy.preset(name)
    assert Policy.load(name) is policy
    assert Policy.load(policy.model_dump()) == policy
    assert Policy.load(json.dumps(policy.model_dump())) == policy
    toml = tmp_path / "p.toml"
    toml.write_text(f'[policy]\npreset = "{name}"\n')
    assert Policy.load(toml) == policy
    assert Policy.load(str(toml)).name() == name


def test_a_file_starts_from_a_preset_and_overrides_options(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"preset": "swe-agent", "keep_recent": 3, "supersede": True}))
    policy = Policy.load(path)
    assert (policy.turn, policy.keep_recent, policy.supersede) == ("step", 3, True)
    assert policy.name() is None


@pytest.mark.parametrize(
    ("content", "suffix", "match"),
    [
        ('{"keep_recent": -1}', ".json", r"policy\.json: invalid policy option keep_recent"),
        ('{"keep_last": 3}', ".json", r"policy\.json: invalid policy option keep_last"),
        ('{"turn": "message"}', ".json", r"invalid policy option turn"),
        ('{"preset": "nope"}', ".json", r"policy\.json: unknown policy preset 'nope'"),
        ('[policy]\npreset = "swe-agnet"\n', ".toml", r"policy\.toml: unknown policy preset"),
        ("keep_recent = [", ".toml", r"policy\.toml: not valid TOML"),
        ("{", ".json", r"policy\.json: not valid JSON"),
        ("[1, 2]", ".json", r"policy\.json: expected a table of policy options"),
    ],
)
def test_a_bad_policy_file_names_the_file_and_the_field(
    tmp_path: Path, content: str, suffix: str, match: str
) -> None:
    path = tmp_path / f"policy{suffix}"
    path.write_text(content)
    with pytest.raises(ConfigError, match=match):
        Policy.load(path)


def test_bad_policies_anywhere_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown policy preset 'opencod'"):
        Policy.load("opencod")
    with pytest.raises(ConfigError, match="cannot read the policy"):
        Policy.load(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="keep_recent"):
        CompactionConfig(policy={"keep_recent": -5})
    with pytest.raises(ConfigError, match="protect_turns"):
        cc.prune(autonomous_run(2), {"protect_turns": "two"})
    with pytest.raises(ConfigError, match="prune takes a CompactionConfig, a Policy"):
        cc.prune(autonomous_run(2), 3)  # type: ignore[arg-type]
    from ctxcompact import _core

    table = cc.Transcript.from_sessions([autonomous_run(2)]).to_arrow()
    with pytest.raises(ConfigError, match='unknown policy option "keep"'):
        _core.prune(table, {"keep": 1})
    with pytest.raises(ConfigError, match='policy option "protect"'):
        _core.prune(table, {"protect": -1})
    with pytest.raises(ConfigError, match="unknown turn unit"):
        _core.prune(table, {"turn": "message"})


def test_the_environment_sets_the_policy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CTXCOMPACT_POLICY", "swe-agent")
    config = CompactionConfig()
    assert config.policy == PRESETS["swe-agent"]
    assert config.sources()["policy"] == "environment CTXCOMPACT_POLICY"
    monkeypatch.setenv("CTXCOMPACT_POLICY", '{"preset": "swe-agent", "keep_recent": 2}')
    assert CompactionConfig().policy.keep_recent == 2
    path = tmp_path / "p.toml"
    path.write_text('turn = "step"\nprotect_turns = 1\n')
    monkeypatch.setenv("CTXCOMPACT_POLICY", str(path))
    assert CompactionConfig().policy.turn == "step"
    monkeypatch.setenv("CTXCOMPACT_POLICY", "nope")
    with pytest.raises(ConfigError, match="environment variable CTXCOMPACT_POLICY='nope'"):
        CompactionConfig()


def test_a_config_file_holds_a_policy_table(tmp_path: Path) -> None:
    path = tmp_path / "ctxcompact.toml"
    path.write_text('[compaction]\nauto = true\n[compaction.policy]\npreset = "swe-agent"\n'
                    "keep_recent = 7\n")  # fmt: skip
    assert CompactionConfig.from_file(path).policy.keep_recent == 7
    path.write_text("[compaction.policy]\nkeep_recent = -7\n")
    with pytest.raises(ConfigError, match=r"ctxcompact\.toml: invalid policy"):
        CompactionConfig.from_file(path)


def test_opencodes_prune_fields_override_the_policy_only_when_set() -> None:
    swe = CompactionConfig(policy="swe-agent")
    assert swe.prune_policy() == PRESETS["swe-agent"]  # defaults do not leak in
    tuned = CompactionConfig(policy="swe-agent", prune_protect=5_000, prune_protected_tools=[])
    assert (tuned.prune_policy().protect, tuned.prune_policy().keep_recent) == (5_000, 5)
    assert CompactionConfig(policy="swe-agent", prune=False).prune_policy().enabled is False


def cli(*args: str) -> tuple[int, str, str]:
    """Run the ``ctxcompact`` command as a user does (exit code, stdout, stderr)."""
    code = "import sys; from ctxcompact.cli import main; sys.argv[0] = 'ctxcompact'; main()"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


def test_the_cli_takes_a_policy(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(autonomous_run(30).model_dump_json())
    code, out, err = cli("prune", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["parts_pruned"] == 0
    code, out, err = cli("prune", str(path), "--policy", "swe-agent", "--json")
    assert code == 0, err
    assert json.loads(out)["parts_pruned"] == 25
    bad = tmp_path / "bad.toml"
    bad.write_text("keep_recent = -1\n")
    code, out, err = cli("prune", str(path), "--policy", str(bad))
    assert code == 4
    assert "bad.toml: invalid policy option keep_recent" in err
    code, out, err = cli("prune", str(path), "--policy", "nope")
    assert code == 4
    assert "unknown policy preset 'nope'" in err
    typo = tmp_path / "typo.toml"
    typo.write_text('[policy]\npreset = "swe-agnet"\n')
    code, out, err = cli("prune", str(path), "--policy", str(typo))
    assert code == 4 and f"{typo}: unknown policy preset 'swe-agnet'" in err
    for spec in ("policy.tml", str(tmp_path / "policies" / "mine")):  # a path, no such file
        code, out, err = cli("prune", str(path), "--policy", spec)
        assert code == 4 and "neither a preset" in err and "nor an existing policy file" in err
        assert "unknown policy preset" not in err


@pytest.mark.parametrize("preset", ["swe-agent", "aggressive", "anthropic-clear-tool-uses"])
def test_a_config_dump_loads_back_to_the_same_prune_policy(preset: str) -> None:
    # Loading a dump sets every field it holds: a default prune_protect written
    # out used to override the policy's own protect (swe-agent masked nothing).
    config = cc.CompactionConfig(policy=preset, mask_first=True)
    for again in (cc.CompactionConfig.model_validate(config.model_dump()),
                  cc.CompactionConfig.model_validate_json(config.model_dump_json()),
                  cc.CompactionConfig(**config.model_dump())):  # fmt: skip
        assert again.prune_policy() == config.prune_policy() == cc.policy.Policy.load(preset)
    # a prune field the user set is kept, and still applies
    legacy = cc.CompactionConfig(policy=preset, prune_protect=1_234)
    dumped = legacy.model_dump()
    assert dumped["prune_protect"] == 1_234
    assert cc.CompactionConfig.model_validate(dumped).prune_policy().protect == 1_234


def test_describe_names_a_preset_or_what_differs_from_the_nearest() -> None:
    assert Policy().describe() == "opencode"
    assert Policy.load({"preset": "swe-agent", "protect": 1000}).describe() == (
        "swe-agent+protect=1000"
    )
    assert Policy(protect=1000, minimum=500, exclude_tools=[]).describe() == (
        "opencode+protect=1000,minimum=500,exclude_tools=[]"
    )


def test_the_cache_aware_preset_is_swe_agents_selection_behind_the_cache_gate() -> None:
    policy = Policy.preset("cache-aware")
    assert policy.cache_aware and policy.name() == "cache-aware"
    assert (policy.cache_read, policy.cache_write, policy.expected_calls) == (0.1, 1.25, 12)
    plain = policy.model_copy(update={"cache_aware": False, "expected_calls": 0})
    assert plain == Policy.preset("swe-agent")
    # With a price sheet's ratios it is no preset any more, and says so.
    gpt4o = policy.with_cache_prices(0.5, 1.0)
    assert (gpt4o.cache_read, gpt4o.cache_write) == (0.5, 1.0)
    assert gpt4o.describe() == "cache-aware+cache_read=0.5,cache_write=1.0"
    assert Policy.preset("swe-agent").with_cache_prices(0.5, 1.0) == Policy.preset("swe-agent")


def _break_even_write(run: Session, read: float, saving: int, calls: int) -> float:
    """The cache-write price at which clearing ``saving`` tokens from the first
    step on exactly pays over ``calls`` calls: read x S x n = (w - read) x (A - S)."""
    from ctxcompact.scans import estimate_messages

    tokens = estimate_messages(run).messages
    ids, counts = tokens["message_id"].to_pylist(), tokens["tokens"].to_pylist()
    after = sum(t for m, t in zip(ids, counts, strict=True) if m != "task")
    return read + read * saving * calls / (after - saving)


@pytest.mark.parametrize("expected_calls, remaining", [(0, 30), (40, 10), (20, 1)])
def test_the_cache_gate_acts_just_below_its_break_even_and_not_above(
    expected_calls: int, remaining: int
) -> None:
    run = autonomous_run(30)  # swe-agent's selection: 25 outputs, 25 000 tokens
    write = _break_even_write(run, 0.1, 25_000, remaining)

    def pruned(w: float) -> int:
        policy = Policy.load({"preset": "cache-aware", "cache_read": 0.1, "cache_write": w,
                              "expected_calls": expected_calls})  # fmt: skip
        return cc.prune(run, policy).pruned

    assert pruned(write * 0.999) == 25_000
    assert pruned(write * 1.001) == 0
    # A live loop's view is the same rule.
    policy = Policy.load({"preset": "cache-aware", "cache_write": write * 1.001,
                          "expected_calls": expected_calls})  # fmt: skip
    assert cc.to_model_messages(run, policy=policy) == cc.to_model_messages(run)


def test_without_a_cache_the_gate_clears_what_swe_agent_clears() -> None:
    run = autonomous_run(7)
    free = Policy.load({"preset": "cache-aware", "cache_read": 1, "cache_write": 1})
    assert cc.prune(run, free).part_ids == cc.prune(run, "swe-agent").part_ids
    assert cc.prune(run, "cache-aware").pruned == 0  # 2 outputs, 7 calls: not at 0.1 / 1.25


@pytest.mark.parametrize(
    "options, field",
    [
        ({"cache_read": -0.1}, "cache_read"),
        ({"cache_read": float("nan")}, "cache_read"),
        ({"cache_write": float("inf")}, "cache_write"),
        ({"cache_read": 0.5, "cache_write": 0.4}, "cache_write"),
        ({"expected_calls": -1}, "expected_calls"),
        ({"expected_calls": 2**32}, "expected_calls"),
        ({"cache_aware": "sometimes"}, "cache_aware"),
    ],
)
def test_a_bad_cache_option_is_a_config_error_naming_it(
    options: dict[str, Any], field: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=field) as caught:
        Policy.load({"preset": "cache-aware", **options})
    assert caught.value.column == field
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"preset": "cache-aware", **options}).replace("NaN", '"nan"'))
    with pytest.raises(ConfigError, match=str(path)):
        Policy.load(path)
