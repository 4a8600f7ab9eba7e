"""Which tokenizer family a model counts in (``family_for``), and the exact
per-part count columns (``count_parts``)."""

from __future__ import annotations

from pathlib import Path

import ctxcompact._core as _core
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, InputTypeError
from ctxcompact.scans import (
    count_chat_tokens,
    count_tokens_array,
    estimate_messages,
    family_for,
    to_model_messages,
)
from ctxcompact.scans.overflow import BUILTIN_LIMITS, TOKENIZER_FAMILIES
from ctxcompact.transcript import (
    OUTPUT_HASH,
    UNITS_KEY,
    Transcript,
    count_exact_parts,
    exact_families,
)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o-2024-08-06", "o200k"),
        ("gpt-4o-mini", "o200k"),
        ("openai/gpt-4.1-mini", "o200k"),
        ("azure/GPT-4o", "o200k"),
        ("gpt-5-2025-08-07", "o200k"),
        ("o1-mini", "o200k"),
        ("o3", "o200k"),
        ("o4-mini-2025-04-16", "o200k"),
        ("gpt-4", "cl100k"),
        ("gpt-4-turbo-2024-04-09", "cl100k"),
        ("gpt-3.5-turbo", "cl100k"),
        ("llama-3.1-70b-instruct", "llama3"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3"),
        ("qwen2.5-coder-32b", "qwen"),
        ("mistral-large-latest", "tekken"),
        ("codestral-2501", "tekken"),
        ("deepseek-chat", "deepseek"),
        ("claude-sonnet-4-5-20250929", None),
        ("gemini-2.5-pro", None),
        ("o100-unknown", None),
        ("my-own-model", None),
        (None, None),
    ],
)
def test_family_follows_the_model(model: str | None, family: str | None) -> None:
    assert family_for(model) == family


def test_every_builtin_model_has_its_family_or_an_estimate() -> None:
    for model in BUILTIN_LIMITS:
        expected = None if model.startswith("claude") else "o200k"
        if model.startswith(("gpt-4-", "gpt-3.5")) or model == "gpt-4":
            expected = "cl100k"
        assert family_for(model) == expected, model
    # a longer prefix is listed before any shorter prefix of it
    prefixes = [p for p, _ in TOKENIZER_FAMILIES]
    for i, p in enumerate(prefixes):
        assert not any(p.startswith(q) and q != p for q in prefixes[:i]), p


def test_a_model_that_is_not_a_name_is_an_input_type_error() -> None:
    with pytest.raises(InputTypeError):
        family_for(4)  # type: ignore[arg-type]


def _sessions_table() -> pa.Table:
    table = generate_table(3, 30, seed=11, mean_output_chars=400)
    sessions = Transcript(table).to_sessions()
    return Transcript.from_sessions(sessions).to_arrow()


def _exact(table: pa.Table | Transcript, family: str = "o200k") -> list[int]:
    config = CompactionConfig(estimate_method=f"{family}-exact")
    return estimate_messages(table, config).messages.column("tokens").to_pylist()


def test_count_parts_counts_every_output_exactly() -> None:
    """As ``count_tokens_array`` counts each output (test_exact_tokens checks
    that against tiktoken itself); a null output counts 0."""
    table = _sessions_table()
    counted = Transcript(table).count("o200k").to_arrow()
    want = count_tokens_array(pc.fill_null(table.column("output"), ""), "o200k")
    assert counted.column("output_tokens_o200k").to_pylist() == want.to_pylist()
    field = counted.schema.field("output_tokens_o200k")
    assert field.metadata == {UNITS_KEY.encode(): b"o200k-exact"}
    assert exact_families(counted.schema) == ["o200k"]


def test_exact_estimates_read_the_counts_and_are_the_chat_as_openai_bills_it() -> None:
    table = _sessions_table()
    counted = Transcript(table).count("o200k")
    assert _exact(counted) == _exact(table)
    # the counts alone are enough: the outputs need not be read (the column is
    # dropped: only the counts can give these numbers)
    assert _exact(counted.to_arrow().drop_columns(["output"])) == _exact(table)
    # 4 per message (3 + its role's token) and 3 priming the reply: OpenAI's
    # count of the same chat
    session = Transcript(table).to_sessions()[0]
    one = Transcript.from_sessions([session]).count("o200k")
    total = sum(_exact(one))
    assert total + 3 == count_chat_tokens(to_model_messages(session), "o200k")


def _with_output(table: pa.Table, output: list[str | None]) -> pa.Table:
    i = table.schema.get_field_index("output")
    return table.set_column(i, table.schema.field(i), pa.array(output, pa.large_string()))


def test_a_count_whose_text_changed_after_counting_is_never_read() -> None:
    table = _sessions_table()
    counted = Transcript(table).count("o200k").to_arrow()
    outputs = table.column("output").to_pylist()
    longest = max(range(len(outputs)), key=lambda i: len(outputs[i] or ""))
    outputs[longest] = (outputs[longest] or "") + " and some words appended after counting"
    stale = _with_output(counted, outputs)  # counts and hashes of the old text
    fresh = _with_output(table, outputs)
    assert _exact(stale) == _exact(fresh) != _exact(counted)
    # the hashes are what tells: with the new text's hash beside the old
    # count the old count would be read (what a scan without the check does)
    hashes = pa.chunked_array(_core.text_hashes(pa.array(outputs, pa.large_string())))
    forged = stale.set_column(stale.schema.get_field_index(OUTPUT_HASH), OUTPUT_HASH, hashes)
    assert _exact(forged) == _exact(counted) != _exact(fresh)
    # counting again keeps the unchanged counts and counts the changed one
    again = count_exact_parts(stale, "o200k")
    assert again.column("output_tokens_o200k") == count_exact_parts(fresh, "o200k").column(
        "output_tokens_o200k"
    )


def test_a_foreign_familys_or_an_estimates_counts_are_never_read() -> None:
    table = _sessions_table()
    counted = Transcript(table).count("o200k").to_arrow()
    bogus = pa.array([10**6] * counted.num_rows, pa.int64())
    i = counted.schema.get_field_index("output_tokens_o200k")
    # o200k's counts named as cl100k's: the stamp says o200k, not read for cl100k
    renamed = counted.set_column(
        i, counted.schema.field(i).with_name("output_tokens_cl100k"), bogus
    )
    assert _exact(renamed, "cl100k") == _exact(table, "cl100k")
    # a column of that name with an estimate's stamp (or none): not read either
    for metadata in ({UNITS_KEY: "o200k:0123456789abcdef"}, None):
        other = counted.set_column(
            i, pa.field("output_tokens_o200k", pa.int64(), metadata=metadata), bogus
        )
        assert _exact(other) == _exact(table)
        assert exact_families(other.schema) == []


def test_an_unknown_family_is_a_config_error() -> None:
    table = _sessions_table()
    with pytest.raises(ConfigError, match="gpt4"):
        Transcript(table).count("gpt4")


def test_ingest_count_keeps_exact_counts_and_a_bad_family_names_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxcompact import formats

    src = tmp_path / "runs.jsonl"
    formats.write(Transcript(_sessions_table()).to_sessions(), src, "opencode")
    rows = tmp_path / "rows.parquet"
    code, _, err = invoke(monkeypatch, capsys, "ingest", str(src), "-o", str(rows),
                          "--count", "o200k", "--json")  # fmt: skip
    assert code == 0, err
    table = pq.read_table(rows)
    assert exact_families(table.schema) == ["o200k"]
    assert table.column("output_tokens_o200k") == count_exact_parts(
        table.drop_columns(["output_tokens_o200k", OUTPUT_HASH]), "o200k"
    ).column("output_tokens_o200k")
    bad = tmp_path / "bad.parquet"
    code, _, err = invoke(monkeypatch, capsys, "ingest", str(src), "-o", str(bad),
                          "--count", "gpt4")  # fmt: skip
    assert code == 4 and "--count gpt4" in err and "ConfigError" in err, err
    assert not bad.exists()
