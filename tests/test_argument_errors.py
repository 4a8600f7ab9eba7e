"""Arguments of the wrong kind or value: a typed error naming what is wrong,
never a silently ignored argument or an AttributeError from deep inside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.errors import (
    CompactionError,
    ConfigError,
    FormatError,
    InputTypeError,
    InvalidUsageError,
    NullValueError,
)
from ctxcompact.policy import Policy
from ctxcompact.scans import check_overflow, count_chat_tokens, is_overflow
from ctxcompact.scans.chat import estimate_chat_message, estimate_chat_messages


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return generate_table(3, 300, seed=1)


def _tokens(table: pa.Table, config: Any) -> list[int]:
    return list(cc.estimate_messages(table, config).sessions["tokens"].to_pylist())


def test_estimate_messages_reads_every_config_form_prune_takes(table: pa.Table) -> None:
    default = _tokens(table, None)
    ceil = _tokens(table, cc.CompactionConfig(estimate_method="ceil-bytes"))
    assert ceil != default
    # A preset name and a Policy give their rendering, as in prune.
    assert _tokens(table, "swe-agent") == _tokens(table, Policy.load("swe-agent"))
    described = {"placeholder": "describe"}
    pruned = cc.prune(table, {"turn": "step", "protect": 0, "minimum": 0})
    assert pruned.pruned > 0
    marked = cc.mark_pruned(table, pruned, now_ms=1)
    assert _tokens(marked, described) != _tokens(marked, None)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"estimate_method": "o200k"}, "CompactionConfig field"),
        ("ceil-bytes", "unknown policy preset"),
        (5, "got int"),
    ],
)
def test_estimate_messages_refuses_a_config_it_cannot_read(
    table: pa.Table, config: Any, says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        cc.estimate_messages(table, config)


USAGE, LIMITS = {"input": 1000, "output": 0}, {"context": 33_000}  # usable 1000


def test_overflow_options_may_be_a_mapping() -> None:
    assert is_overflow(USAGE, LIMITS) is False
    assert is_overflow(USAGE, LIMITS, {"inclusive": True}) is True
    assert is_overflow(USAGE, LIMITS, cc.CompactionConfig(inclusive=True)) is True


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ("garbage", "got str"),
        ({"inclusve": True}, "unknown overflow option 'inclusve'"),
        ({"inclusive": "yes"}, "must be true or false"),
        ({"reserved": -1}, "non-negative"),
    ],
)
def test_overflow_refuses_options_it_cannot_read(config: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        check_overflow(USAGE, LIMITS, config)


@pytest.mark.parametrize(
    ("cache", "says"),
    [({"reed": 10**6}, "did you mean 'read'"), (5, "must be a mapping")],
)
def test_a_cache_count_that_would_be_dropped_is_an_error(cache: Any, says: str) -> None:
    with pytest.raises(InvalidUsageError, match=says):
        check_overflow({**USAGE, "cache": cache}, LIMITS)
    with pytest.raises(InvalidUsageError, match="unknown key 'inptu'"):
        check_overflow({"inptu": 5, **USAGE}, LIMITS)
    # OpenCode's later releases also write a total: accepted, not read.
    report = check_overflow({**USAGE, "total": 9, "cache": {"read": 5, "write": 1}}, LIMITS)
    assert report.count == 1005


def test_a_part_row_without_a_part_type_is_an_error(table: pa.Table) -> None:
    types = table["part_type"].combine_chunks().dictionary_decode().to_pylist()
    row = types.index("tool")
    types[row] = None
    broken = table.set_column(
        table.schema.get_field_index("part_type"), "part_type", pa.array(types, pa.string())
    )
    for scan in (cc.prune, cc.estimate_messages, cc.filter_pivot):
        with pytest.raises(NullValueError, match="part type") as e:
            scan(broken)
        assert (e.value.row, e.value.column) == (row, "part_type")


def test_chat_estimates_refuse_what_they_cannot_count() -> None:
    hi = [{"role": "user", "content": "hi"}]
    assert estimate_chat_messages(hi, overhead=0) == 1
    with pytest.raises(ConfigError, match="overhead"):
        estimate_chat_messages(hi, overhead=-10)
    with pytest.raises(ConfigError, match="overhead"):
        estimate_chat_message(hi[0], overhead=-1)
    bad: list[Any] = [
        "hello",
        [{"content": "no role"}],
        [{"role": "user", "content": 3}],
        [{"role": "assistant", "content": None, "tool_calls": "x"}],
        ["not a dict"],
    ]
    for messages in bad:
        with pytest.raises(FormatError):
            estimate_chat_messages(messages)
        with pytest.raises(FormatError):
            count_chat_tokens(messages)


def test_to_model_messages_takes_a_policy_by_name(table: pa.Table) -> None:
    session = cc.Transcript(table).to_sessions()[0]
    named = cc.to_model_messages(session, policy="swe-agent")
    assert named == cc.to_model_messages(session, policy=Policy.load("swe-agent"))
    with pytest.raises(ConfigError, match="nope"):
        cc.to_model_messages(session, policy="nope")


@pytest.mark.parametrize(
    "call",
    [
        lambda t: cc.estimate_tokens(None),
        lambda t: cc.ModelRegistry().get(None),
        lambda t: cc.mark_pruned(t, "x"),
        lambda t: cc.prune(None),
        lambda t: cc.prune({"info": {"id": "s"}, "messages": []}),
        lambda t: cc.to_model_messages({"info": {"id": "s"}, "messages": []}),
        lambda t: cc.compact_messages([{"role": "user", "content": "x"}], None, context=1000),
        lambda t: cc.read_sessions(None),
        lambda t: cc.read_sessions([5]),
        lambda t: formats.write([{"a": 1}], "x.jsonl", "opencode"),
        lambda t: cc.Summarizer("gpt-4o"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_an_input_type_error(table: pa.Table, call: Any) -> None:
    with pytest.raises(InputTypeError) as e:
        call(table)
    # Both the library's error and the TypeError Python code expects.
    assert isinstance(e.value, CompactionError) and isinstance(e.value, TypeError)


def test_compact_messages_with_an_unlimited_window_compacts_nothing() -> None:
    chat = [{"role": "user", "content": "x " * 5000}, {"role": "assistant", "content": "ok"}]
    result = cc.compact_messages(chat, cc.Summarizer(None), context=0)
    assert result.record is None and result.messages == chat
    with pytest.raises(ConfigError, match="context"):
        cc.compact_messages(chat, cc.Summarizer(None), context=-5)


def test_config_sources_that_would_be_misread_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mixed = tmp_path / "mixed.toml"
    mixed.write_text("prune_protect = 7\n[compaction]\nprune_minimum = 3\n")
    with pytest.raises(ConfigError, match="prune_protect is outside the \\[compaction\\] table"):
        cc.CompactionConfig.from_file(mixed)
    inside = tmp_path / "inside.toml"
    inside.write_text("[compaction]\nprune_protect = 7\n[other_tool]\nx = 1\n")
    assert cc.CompactionConfig.from_file(inside).prune_protect == 7
    yaml = tmp_path / "conf.yaml"
    yaml.write_text("prune_protect: 5\n")
    with pytest.raises(ConfigError, match=r"\.toml or \.json"):
        cc.CompactionConfig.from_file(yaml)
    monkeypatch.setenv("CTXCOMPACT_DISABLE_PRUNE", "maybe")
    with pytest.raises(ConfigError, match="CTXCOMPACT_DISABLE_PRUNE"):
        cc.CompactionConfig()
    monkeypatch.setenv("CTXCOMPACT_DISABLE_PRUNE", "off")
    assert cc.CompactionConfig().prune is True
    monkeypatch.setenv("CTXCOMPACT_DISABLE_PRUNE", "yes")
    assert cc.CompactionConfig().prune is False


def test_formats_write_names_the_missing_folder_and_writes_whole(
    tmp_path: Path, table: pa.Table
) -> None:
    sessions = cc.Transcript(table).to_sessions()
    with pytest.raises(FileNotFoundError, match="no folder") as e:
        formats.write(sessions, tmp_path / "nope" / "x.jsonl", "opencode")
    assert e.value.filename == str(tmp_path / "nope")
    out = tmp_path / "x.jsonl"
    out.write_text("old\n")
    with pytest.raises(InputTypeError):
        formats.write([*sessions, {"info": {}}], out, "opencode")
    assert out.read_text() == "old\n"  # nothing half-written


def test_a_batch_refuses_a_timestamp_that_reads_as_not_compacted(table: pa.Table) -> None:
    for now in (0, -1):
        for parts in (False, True):
            with pytest.raises(ConfigError, match="now_ms"):
                cc.compact_batch(table, now_ms=now, parts=parts)
