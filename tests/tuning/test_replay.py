"""Replaying stored runs call by call under a policy: prompts, cache reads and
writes, compactions, and what it all costs against the run without them."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from ctxcompact import formats
from ctxcompact.errors import ConfigError, InputTypeError
from ctxcompact.tuning import PRICES, Price, price_of, replay

SWE = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "swe-agent"


def run(steps: int, chars: int, *, gap_ms: int = 1_000, summary: bool = False) -> cc.Session:
    """A task, then ``steps`` assistant steps each reading a file of ``chars``."""
    messages: list[dict[str, Any]] = [
        {"info": {"id": "u0", "role": "user", "time": {"created": 0}},
         "parts": [{"id": "t0", "type": "text", "text": "fix the bug"}]},
    ]  # fmt: skip
    if summary:  # the run's own compaction: not replayed
        messages += [
            {"info": {"id": "c0", "role": "user"},
             "parts": [{"id": "c0p", "type": "compaction", "auto": True}]},
            {"info": {"id": "s0", "role": "assistant", "parentID": "c0", "summary": True,
                      "finish": "stop"}, "parts": [{"id": "s0p", "type": "text", "text": "old"}]},
        ]  # fmt: skip
    for i in range(steps):
        messages.append({
            "info": {"id": f"a{i}", "role": "assistant", "parentID": "u0", "finish": "tool-calls",
                     "time": {"created": (i + 1) * gap_ms}},
            "parts": [{"id": f"p{i}", "type": "tool", "tool": "read", "callID": f"c{i}",
                       "state": {"status": "completed", "input": {"path": f"f{i}.py"},
                                 "output": "x" * chars}}],
        })  # fmt: skip
    return cc.Session.model_validate({"info": {"id": "r"}, "messages": messages})


WIDE = {"context": 1_000_000, "output": 8_000}
NARROW = {"context": 12_000, "output": 1_000}


def test_without_compaction_every_call_reads_the_previous_prompt_from_the_cache() -> None:
    result = replay(run(6, 4_000), limits=WIDE)
    calls = result.calls.to_pylist()
    assert len(calls) == 6 and not any(c["compacted"] for c in calls)
    for before, after in itertools.pairwise(calls):
        assert after["cached_tokens"] == before["prompt_tokens"]
    assert [c["prompt_tokens"] for c in calls] == [c["baseline_prompt_tokens"] for c in calls]
    assert all(c["written_tokens"] == c["prompt_tokens"] - c["cached_tokens"] for c in calls)
    assert result.summary["calls"] == 6 and result.summary["compactions"] == 0


def test_a_summary_fires_when_the_window_fills_and_shrinks_the_prompt() -> None:
    result = replay(run(12, 8_000), limits=NARROW)
    calls = result.calls.to_pylist()
    fired = [c for c in calls if c["compacted"]]
    assert fired and fired[0]["reason"] in ("proactive", "critical")
    assert all(c["prompt_tokens"] <= 11_000 for c in calls)
    assert calls[-1]["prompt_tokens"] < calls[-1]["baseline_prompt_tokens"] / 3
    # A compaction rewrites the prompt: almost nothing is read from the cache then.
    assert fired[0]["cached_tokens"] < fired[0]["prompt_tokens"] / 2
    # Offline: the digest summaries cost no model call.
    assert result.summary["summary_input_tokens"] == 0


def test_calls_over_the_window_are_flagged_not_hidden(tmp_path: Path) -> None:
    """A stored system prompt no compaction removes fills the window: every
    call is over it, which the calls, the totals and the CLI say."""
    session = run(3, 1_000)
    system = {"info": {"id": "sys", "role": "system"},
              "parts": [{"id": "sysp", "type": "text", "text": "rules " * 8_000}]}  # fmt: skip
    session = cc.Session.model_validate(
        {"info": {"id": "r"}, "messages": [system, *session.to_export()["messages"]]}
    )
    result = replay(session, limits=NARROW)
    assert [c["over_window"] for c in result.calls.to_pylist()] == [True] * 3
    assert result.summary["over_window"] == 3
    assert result.sessions.to_pylist()[0]["over_window"] == 3
    fits = replay(run(12, 8_000), limits=NARROW)
    assert fits.summary["over_window"] == 0
    path = tmp_path / "run.json"
    formats.write([session], path, "opencode")
    done = subprocess.run([sys.executable, "-m", "ctxcompact.cli", "replay", str(path),
                           "--context", "12000", "--output-limit", "1000"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "3 call(s) sent a prompt over the input window" in done.stderr


def test_masking_every_step_avoids_summaries_but_breaks_the_cache() -> None:
    config = cc.CompactionConfig(mask_first=True)
    result = replay(run(12, 4_000), "swe-agent", limits=NARROW, config=config,
                    model="claude-sonnet-4")  # fmt: skip
    calls = result.calls.to_pylist()
    assert result.summary["compactions"] == 0
    # From the sixth step on, each call clears one more old output: the prefix changes.
    assert any(c["cached_tokens"] < prev["prompt_tokens"] / 2
               for prev, c in itertools.pairwise(calls[5:]))  # fmt: skip
    # With cache reads at a tenth of the input price, that costs more than it saves.
    assert result.summary["cost"] > result.summary["baseline_cost"]
    assert result.summary["saved"] < 0


def test_costs_follow_the_price_table() -> None:
    result = replay(run(3, 400), limits=WIDE, model="gpt-4o")
    s = result.summary
    price = PRICES["gpt-4o"]
    # Billed under OpenAI's rules: these prompts are under 1,024 tokens, so
    # nothing is read from the cache and nothing written at a premium.
    billed = s["costs"]["gpt-4o"]
    assert billed["cached_tokens"] == billed["written_tokens"] == 0 < s["cached_tokens"]
    want = (billed["input_tokens"] * price.input + s["output_tokens"] * price.output) / 1e6
    assert s["cost"] == pytest.approx(want) and s["cost"] == pytest.approx(s["baseline_cost"])
    custom = replay(run(3, 400), limits=WIDE, model="mine",
                    prices={"mine": {"input": 1, "output": 2}})  # fmt: skip
    # (its own tokens: gpt-4o's run counts o200k exactly, an unknown model's estimates)
    c = custom.summary
    assert c["cost"] == pytest.approx((c["prompt_tokens"] * 1 + c["output_tokens"] * 2) / 1e6)


def test_calls_beyond_the_cache_lifetime_read_nothing_from_it() -> None:
    # The calls hold the raw common prefix and the idle time; the lifetime is
    # the price sheet's (10 minutes apart: past the 5-minute cache).
    late = replay(run(4, 4_000, gap_ms=600_000), limits=WIDE, model="claude-sonnet-4")
    calls = late.calls.to_pylist()
    assert [c["since_previous_s"] for c in calls] == [None, 600.0, 600.0, 600.0]
    assert calls[1]["cached_tokens"] == calls[0]["prompt_tokens"]
    billed = late.summary["costs"]["claude-sonnet-4"]
    assert billed["cached_tokens"] == billed["baseline_cached_tokens"] == 0
    soon = replay(run(4, 4_000), limits=WIDE, model="claude-sonnet-4").summary
    assert soon["costs"]["claude-sonnet-4"]["cached_tokens"] > 0 and soon["cost"] < late.summary[
        "cost"]  # fmt: skip
    # Anthropic's 1-hour cache still holds them, its writes at twice the input price.
    hour = replay(run(4, 4_000, gap_ms=600_000), limits=WIDE, model="claude-sonnet-4",
                  cache="1h").summary["costs"]["claude-sonnet-4"]  # fmt: skip
    assert hour["cached_tokens"] == soon["costs"]["claude-sonnet-4"]["cached_tokens"]


def test_the_runs_own_compactions_are_not_replayed() -> None:
    calls = replay(run(3, 400, summary=True), limits=WIDE).calls.to_pylist()
    assert [c["message_id"] for c in calls] == ["a0", "a1", "a2"]
    plain = replay(run(3, 400), limits=WIDE).calls
    assert calls[0]["prompt_tokens"] == plain["prompt_tokens"][0].as_py()


def test_dated_model_names_listed_by_a_row_are_priced_by_it() -> None:
    assert price_of("claude-sonnet-4-20250514") == PRICES["claude-sonnet-4"]
    assert price_of("gpt-4.1-mini-2025-04-14") == PRICES["gpt-4.1-mini"]
    assert price_of("gpt-4.1-2025-04-14") == PRICES["gpt-4.1"]
    # Issue 37: a dated name no row lists is not priced as its family (a
    # snapshot's price may differ), the user's own table included.
    with pytest.raises(
        ConfigError, match=r"no price for model 'house-20250101'.*nearest rows: house"
    ):
        price_of("house-20250101", {"house": {"input": 1, "output": 2}})
    assert price_of("house-20250101", {"house-20250101": {"input": 1, "output": 2}}).output == 2


def test_the_registry_s_newer_anthropic_models_have_their_list_prices() -> None:
    # Pass 36: `replay --model claude-sonnet-4-5` (a ModelRegistry model) had no price.
    # Anthropic's pricing page: input, cache hits, 5m cache writes, output.
    assert price_of("claude-sonnet-4-5-20250929") == Price(3.00, 0.30, 3.75, 15.00)
    assert price_of("claude-haiku-4-5") == Price(1.00, 0.10, 1.25, 5.00)
    assert price_of("claude-opus-4-1-20250805") == Price(15.00, 1.50, 18.75, 75.00)
    for model in ("claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"):
        assert cc.ModelRegistry().get(model).context == 200_000


@pytest.mark.parametrize(
    "model", ["gpt-4.1-nano", "claude-opus-4-7", "gpt-4o-audio", "claude-sonnet-4-2025", "gpt-4"]
)
def test_a_model_no_row_names_has_no_price(model: str) -> None:
    """Before, any ``<family>-...`` was priced as the family: gpt-4.1-nano as gpt-4.1."""
    with pytest.raises(ConfigError, match=f"no price for model {model!r}"):
        price_of(model)


@pytest.mark.parametrize(
    ("model", "prices", "match"),
    [
        ("gpt-9", None, "no price for model 'gpt-9'"),
        ("m", {"m": {"input": 1}}, "price of 'm' has no 'output'"),
        ("m", {"m": {"input": 1, "output": -2}}, "price of 'm' is negative"),
        ("m", {"m": {"input": 1, "output": 2, "cahced_input": 0.1}}, "unknown field 'cahced_"),
        ("m", {"m": "cheap"}, "expected a table of prices"),
    ],
)
def test_bad_prices(model: str, prices: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        price_of(model, prices)


def test_bad_prices_in_a_config_name_their_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a bad table was found only when a model was priced, and the
    error did not say which file it was in."""
    bad = tmp_path / "prices.toml"
    bad.write_text('[compaction.prices."my-model"]\ninput = 1.0\n')
    with pytest.raises(ConfigError, match=f"{bad}: invalid prices: price of 'my-model' has no"):
        cc.CompactionConfig.from_file(bad)
    typo = tmp_path / "typo.toml"
    typo.write_text("[compaction.prices.gpt-4o]\ninput = 1\noutput = 2\ncache_wrte = 3\n")
    with pytest.raises(ConfigError, match=f"{typo}: .*unknown field 'cache_wrte'"):
        cc.CompactionConfig.from_file(typo)
    monkeypatch.setenv("CTXCOMPACT_PRICES", '{"m": {"output": 1}}')
    with pytest.raises(ConfigError, match=r"CTXCOMPACT_PRICES=.*price of 'm' has no 'input'"):
        cc.CompactionConfig()
    # not JSON: the example was the tool list's ('["skill", "todo"]')
    monkeypatch.setenv("CTXCOMPACT_PRICES", '{"m": {"input": 1, "output": 2')
    with pytest.raises(ConfigError) as caught:
        cc.CompactionConfig()
    assert """invalid prices: expected JSON (e.g. '{"my-model": {"input": 3""" in str(caught.value)
    assert "skill" not in str(caught.value)


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match="item 0 is a dict"):
        replay([{"info": {}}], limits=WIDE)  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="cache_ttl_s"):
        replay(run(1, 10), limits=WIDE, cache_ttl_s=-1)
    with pytest.raises(ConfigError, match="unknown policy preset"):
        replay(run(1, 10), "nope", limits=WIDE)
    assert Price.coerce({"input": 1, "output": 1}).cached_input == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        # each was a bare TypeError from deep inside, naming no argument
        ({"data": None}, InputTypeError, r"replay takes a Session.*\(data\), got NoneType"),
        ({"data": 5}, InputTypeError, r"\(data\), got int"),
        # a path was iterated character by character ("item 0 is a str")
        ({"data": "/runs"}, InputTypeError, r"not a path \('/runs'\): read session files"),
        ({"data": Path("/runs")}, InputTypeError, "not a path"),
        ({"data": {"info": {}}}, InputTypeError, "not a dict: Session.model_validate"),
        ({"model": 5}, ConfigError, r"model must be a model name \(str\), got int 5"),
        ({"model": "x", "prices": [1]}, ConfigError, "prices must be a dict of model name"),
        ({"cache_ttl_s": "300"}, ConfigError, "cache_ttl_s must be a number of at least 0, got"),
        ({"cache_ttl_s": True}, ConfigError, "cache_ttl_s must be a number"),
        ({"cache_ttl_s": float("nan")}, ConfigError, "cache_ttl_s must be a number"),
        # was a FormatError about chat message 0
        ({"system": 5}, InputTypeError, r"system must be a str \(the system prompt\), got int"),
        ({"summarizer": "digest"}, InputTypeError, "summarizer must be a Summarizer"),
        # a dict was read as overflow options: "unknown overflow option 'mask_first'"
        ({"config": {"protect": 5}}, ConfigError, "protect is a policy option, not a Compaction"),
        ({"config": {"mask_firts": True}}, ConfigError, "replay: config: invalid mask_firts"),
        ({"config": "cfg.toml"}, ConfigError, "config takes a CompactionConfig or a dict of its"),
    ],
)  # fmt: skip
def test_arguments_of_the_wrong_kind_are_named(
    kwargs: dict[str, Any], error: type[Exception], says: str
) -> None:
    args = {"data": run(3, 100), "limits": NARROW, **kwargs}
    with pytest.raises(error, match=says):
        replay(**args)


def test_config_takes_a_dict_of_its_fields() -> None:
    session = run(12, 4_000)
    # A policy that acts only as a summary runs: mask_first is what masks it.
    policy = {"preset": "swe-agent", "acts": "summary"}
    as_dict = replay(session, policy, limits=NARROW, config={"mask_first": True})
    as_config = replay(session, policy, limits=NARROW,
                       config=cc.CompactionConfig(mask_first=True))  # fmt: skip
    plain = replay(session, policy, limits=NARROW)
    assert as_dict.calls.equals(as_config.calls) and not as_dict.calls.equals(plain.calls)


@pytest.mark.parametrize("preset", ["swe-agent", "anthropic-clear-tool-uses"])
def test_a_preset_that_acts_at_every_call_masks_without_mask_first(preset: str) -> None:
    # Issue 39 part 4: SWE-agent's processor and Anthropic's context editing act
    # at every call, so their presets do, with --mask-first or without.
    session = run(60, 10_000)  # about 150k tokens: over Anthropic's 100k trigger
    wide = {"context": 1_000_000, "output": 1_000}  # no summary: masking alone
    plain = replay(session, preset, limits=wide)
    forced = replay(session, preset, limits=wide, config={"mask_first": True})
    assert plain.calls.equals(forced.calls)
    assert plain.summary["prompt_tokens"] < plain.summary["baseline_prompt_tokens"]
    masked = plain.calls.filter(pc.less(plain.calls["prompt_tokens"],
                                        plain.calls["baseline_prompt_tokens"]))  # fmt: skip
    assert masked.num_rows > 0
    waiting = replay(session, {"preset": preset, "acts": "summary"}, limits=wide)
    assert waiting.summary["prompt_tokens"] == waiting.summary["baseline_prompt_tokens"]


@pytest.mark.skipif(not SWE.is_dir(), reason="needs ../shared/data")
def test_real_swe_agent_runs() -> None:
    sessions = [formats.read(p)[0] for p in sorted(SWE.rglob("*.traj"))[:6]]
    plain = replay(sessions, "swe-agent", limits=NARROW, model="claude-sonnet-4")
    masked = replay(sessions, "swe-agent", limits=NARROW, model="claude-sonnet-4",
                    config=cc.CompactionConfig(mask_first=True))  # fmt: skip
    assert plain.summary["calls"] == masked.summary["calls"] > 50
    assert masked.summary["compactions"] <= plain.summary["compactions"]
    assert masked.summary["prompt_tokens"] < plain.summary["baseline_prompt_tokens"]
    assert masked.sessions.num_rows == len(sessions)


def test_model_summaries_are_counted() -> None:
    from ctxcompact.clients.base import SummaryRequest, SummaryResponse
    from ctxcompact.live.summary import Summarizer

    class Client:
        def complete(self, request: SummaryRequest) -> SummaryResponse:
            return SummaryResponse("## Session Summary\n" + "notes " * 100, "stop")

    config = cc.CompactionConfig()
    result = replay(run(12, 8_000), limits=NARROW, config=config,
                    summarizer=Summarizer(Client(), config))  # fmt: skip
    fired = [c for c in result.calls.to_pylist() if c["compacted"]]
    assert fired and all(c["summary_input_tokens"] > 5_000 for c in fired)
    # the summary message as sent: ~600 characters of notes
    assert all(140 < c["summary_output_tokens"] < 200 for c in fired)


def test_prices_from_the_config_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXCOMPACT_PRICES", '{"house-model": {"input": 1, "output": 4}}')
    config = cc.CompactionConfig()
    result = replay(run(2, 400), limits=WIDE, config=config, model="house-model")
    s = result.summary
    assert s["cost"] == pytest.approx((s["prompt_tokens"] + 4 * s["output_tokens"]) / 1e6)
    # prices= wins over the config's table
    cheaper = replay(run(2, 400), limits=WIDE, config=config, model="house-model",
                     prices={"house-model": {"input": 0, "output": 0}})  # fmt: skip
    assert cheaper.summary["cost"] == 0
    monkeypatch.setenv("CTXCOMPACT_PRICES", "not json")
    with pytest.raises(ConfigError, match="prices"):
        cc.CompactionConfig()


@pytest.mark.skipif(not SWE.is_dir(), reason="needs ../shared/data")
@pytest.mark.parametrize("method", ["opencode", "o200k", "qwen-conservative", "deepseek"])
def test_replay_batch_and_live_use_one_estimate(method: str) -> None:
    """Issue 16, part 6: for a method, every path measures a call alike: replay's
    prompt, the batch scan summed over the messages before the call, and the
    live estimate of the messages the loop would send."""
    from ctxcompact.scans.chat import estimate_chat_messages
    from ctxcompact.scans.view import to_model_messages

    session = formats.read(sorted(SWE.rglob("*.traj"))[-1])[0]
    config = cc.CompactionConfig(estimate_method=method)
    calls = replay(session, limits=WIDE, config=config).calls.to_pylist()
    batch = cc.estimate_messages(cc.Transcript.from_sessions([session]), config).messages
    per_message = dict(zip(batch["message_id"].to_pylist(), batch["tokens"].to_pylist(),
                           strict=True))  # fmt: skip
    order = [m.info.id for m in session.messages]
    assert len(calls) > 5
    for call in calls:
        before = session.messages[: order.index(call["message_id"])]
        assert call["prompt_tokens"] == sum(per_message[m.info.id] for m in before)
        live = estimate_chat_messages(to_model_messages(cc.Session(info=session.info,
                                                                   messages=before)),
                                      method=method)  # type: ignore[arg-type]  # fmt: skip
        assert call["prompt_tokens"] == live
    opencode = replay(session, limits=WIDE).calls.to_pylist()
    if method != "opencode":  # the method is really used (a fitted table is not chars / 4)
        assert [c["prompt_tokens"] for c in calls] != [c["prompt_tokens"] for c in opencode]


def test_a_policy_given_runs_as_given_and_the_label_names_what_ran(tmp_path: Path) -> None:
    """The config's prune_protect / prune_minimum adjust its own policy only: a
    policy given to replay runs as given, and the config's own policy is
    labelled with the fields applied (before, both were labelled by
    ``config.policy`` while ``prune_policy()`` ran)."""
    toml = tmp_path / "tight.toml"
    toml.write_text('[compaction]\npolicy = "swe-agent"\nprune_protect = 3000\n'
                    "prune_minimum = 0\nmask_first = true\n")  # fmt: skip
    tight = cc.CompactionConfig.from_file(toml)
    plain = cc.CompactionConfig(mask_first=True)
    session = run(14, 2_000)
    given = replay(session, "swe-agent", limits=NARROW, config=tight).summary
    assert given == replay(session, "swe-agent", limits=NARROW, config=plain).summary
    assert given["policy"] == "swe-agent"
    # The config's own policy: swe-agent with protect 3000, labelled so, and
    # another run than the preset's (which its label used to claim).
    own = replay(session, limits=NARROW, config=tight).summary
    ran = tight.prune_policy()
    assert own["policy"] == ran.model_dump() and ran.describe() == "swe-agent+protect=3000"
    assert own == {**replay(session, ran, limits=NARROW, config=plain).summary,
                   "policy": ran.model_dump()}  # fmt: skip
    assert own["prompt_tokens"] != given["prompt_tokens"]


def pruned_after_the_fact(session: cc.Session, parts: int) -> cc.Session:
    """``session`` with the outputs of its first ``parts`` tool parts marked
    pruned (``state.time.compacted``), as ``prune --output`` or a compacted
    OpenCode export stores them."""
    marked = session.model_copy(deep=True)
    tools = [p for m in marked.messages for p in m.parts if p.type == "tool"]
    for p in tools[:parts]:
        p.mark_compacted(5_000)
    return marked


def test_a_runs_stored_prune_marks_are_not_replayed() -> None:
    """The policy under test decides what is cleared: a run pruned after the fact
    gives the baseline and every call of the raw run, and is left as it was."""
    raw = run(12, 4_000)
    pruned = pruned_after_the_fact(raw, 8)
    kept = pruned.model_copy(deep=True)
    for policy, config in [(None, None), ("swe-agent", {"mask_first": True})]:
        for limits in (WIDE, NARROW):
            want = replay(raw, policy, limits=limits, config=config)
            got = replay(pruned, policy, limits=limits, config=config)
            assert got.calls.to_pylist() == want.calls.to_pylist()
            assert got.summary == want.summary
    # the raw run's baseline grows by a whole output each call, from the first on
    base = [c["baseline_prompt_tokens"] for c in replay(pruned, limits=WIDE).calls.to_pylist()]
    assert all(b - a > 900 for a, b in itertools.pairwise(base))
    assert pruned == kept  # the caller's session keeps its marks
    grid = {"preset": ["opencode", "swe-agent"], "context": [12_000, 1_000_000]}
    want_tune = cc.tune([raw], grid, limits={"context": 0, "output": 1_000}, workers=1)
    got_tune = cc.tune([pruned], grid, limits={"context": 0, "output": 1_000}, workers=1)
    assert got_tune.calls.to_pylist() == want_tune.calls.to_pylist()


def test_the_cli_replays_a_pruned_run_as_the_raw_run(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    formats.write([run(12, 4_000)], raw, "opencode")
    pruned = tmp_path / "pruned.parquet"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "ctxcompact.cli", *args],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    cli("prune", str(raw), "--policy", "swe-agent", "--output", str(pruned))
    marks = pq.read_table(pruned).column("compacted_at").drop_null()
    assert len(marks) >= 5  # the file holds prune marks
    outs = {}
    for name, path in (("raw", raw), ("pruned", pruned)):
        done = cli("replay", str(path), "--context", "12000", "--output-limit", "1000",
                   "--policy", "opencode", "--policy", "swe-agent", "--json",
                   "--out", str(tmp_path / f"{name}-calls.parquet"))  # fmt: skip
        outs[name] = json.loads(done.stdout)
    assert outs["pruned"] == outs["raw"]
    calls = [pq.read_table(tmp_path / f"{n}-calls.parquet").to_pylist() for n in ("raw", "pruned")]
    assert calls[0] == calls[1]
    grid = tmp_path / "grid.toml"
    grid.write_text('preset = ["opencode", "swe-agent"]\ncontext = [12000, 200000]\n')
    for name, path in (("raw", raw), ("pruned", pruned)):
        cli("tune", str(path), "--grid", str(grid), "--output-limit", "1000", "--workers", "1",
            "--out", str(tmp_path / f"{name}-tune.parquet"))  # fmt: skip
    tuned = [pq.read_table(tmp_path / f"{n}-tune.parquet").to_pylist() for n in ("raw", "pruned")]
    assert tuned[0] == tuned[1]


@pytest.mark.skipif(not SWE.is_dir(), reason="needs ../shared/data")
def test_the_cli_sums_up_compactions_that_left_a_session_bigger() -> None:
    """One stderr line per session (the library's warning through Python's
    last-resort handler) became one note."""
    runs = sorted((SWE / "tests" / "test_data" / "trajectories" / "ctf").rglob("*.traj"))[:2]
    done = subprocess.run([sys.executable, "-m", "ctxcompact.cli", "replay", *map(str, runs),
                           "--context", "3000", "--output-limit", "1000", "--policy",
                           "swe-agent", "--policy", "opencode", "--json"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "left it bigger" not in done.stderr
    (note,) = [line for line in done.stderr.splitlines() if "bigger than before" in line]
    assert note.startswith("note: 4 compaction(s) in 2 session(s) left the session bigger")
    assert "(swe-agent: 2, opencode: 2)" in note
