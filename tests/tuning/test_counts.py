"""Which count a replay gets (tuning/counts.py): the exact counts of the
model's tokenizer family where the model is known, the estimate where it is
not, ``estimate_method`` set explicitly overriding; every report says which."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.config import CompactionConfig
from ctxcompact.formats.reader import read_sessions
from ctxcompact.transcript import Transcript
from ctxcompact.tuning import replay

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
LIMITS = {"context": 400_000, "output": 4_096}


def _sessions() -> list:
    return Transcript(generate_table(3, 30, seed=5, mean_output_chars=300)).to_sessions()


@pytest.mark.parametrize(
    ("model", "config", "count"),
    [
        ("gpt-4o-2024-08-06", None, "o200k exact"),
        ("gpt-4.1", None, "o200k exact"),
        ("claude-sonnet-4-5", None, "estimate opencode"),
        (None, None, "estimate opencode"),
        ("gpt-4o-2024-08-06", {"estimate_method": "opencode"}, "estimate opencode"),
        ("claude-sonnet-4-5", {"estimate_method": "o200k-exact"}, "o200k exact"),
    ],
)
def test_the_count_follows_the_model_and_the_report_says_which(
    model: str | None, config: dict | None, count: str
) -> None:
    result = replay(_sessions(), limits=LIMITS, model=model, config=config)
    assert result.summary["count"] == count
    assert set(result.sessions.column("count").to_pylist()) == {count}


@pytest.mark.parametrize(
    ("model", "config", "count"),
    [
        ("gpt-4o-2024-08-06", None, "o200k exact"),
        (None, None, "estimate opencode"),
        ("gpt-4o-2024-08-06", {"estimate_method": "opencode"}, "estimate opencode"),
    ],
)
def test_tune_says_which_count_its_figures_use_as_replay_does(
    model: str | None, config: dict | None, count: str
) -> None:
    from ctxcompact.tuning import tune

    sessions = _sessions()
    got = tune(sessions, {"preset": ["opencode", "swe-agent"]}, limits=LIMITS, model=model,
               config=config, workers=1)  # fmt: skip
    assert got.count == count
    assert {s["count"] for s in got.summaries.values()} == {count}
    # The same count as a replay of a point: its prompt tokens are the point's.
    alone = replay(sessions, "swe-agent", limits=LIMITS, model=model, config=config)
    assert alone.summary["count"] == count
    point = got.summaries["preset=swe-agent"]
    assert point["prompt_tokens"] == alone.summary["prompt_tokens"]


def test_following_the_model_is_its_exact_count() -> None:
    sessions = _sessions()
    followed = replay(sessions, limits=LIMITS, model="gpt-4o-2024-08-06")
    exact = replay(sessions, limits=LIMITS, config=CompactionConfig(estimate_method="o200k-exact"))
    estimate = replay(sessions, limits=LIMITS, model="claude-sonnet-4-5")
    assert followed.calls.column("prompt_tokens") == exact.calls.column("prompt_tokens")
    assert followed.calls.column("prompt_tokens") != estimate.calls.column("prompt_tokens")


RUNS = DATA / "transcripts" / "swe-agent" / "tests" / "test_data" / "trajectories"


@pytest.mark.skipif(not RUNS.is_dir(), reason="no ../shared/data")
@pytest.mark.parametrize(
    "run",
    [
        "gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1/"
        "pydicom__pydicom-1458.traj",
        "gpt4__swe-agent__test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1/"
        "swe-agent__test-repo-i1.traj",
    ],
)
def test_exact_counts_are_what_swe_agent_recorded_sending(run: str) -> None:
    """SWE-agent's GPT-4 runs record the prompt tokens they sent
    (info.model_stats.tokens_sent, counted with tiktoken): cl100k exact, 4
    per message and 3 priming each reply, is that total to the token."""
    sessions = read_sessions(RUNS / run).transcript
    config = CompactionConfig(estimate_method="cl100k-exact")
    summary = replay(sessions, limits={"context": 128_000, "output": 4_096},
                     config=config).summary  # fmt: skip
    assert summary["recorded_prompt_tokens"] > 0
    assert summary["baseline_prompt_tokens"] == summary["recorded_prompt_tokens"]
