"""The exact count columns beyond the outputs: each tool call's arguments
(``input_tokens_<family>`` beside ``input_hash``), read by every scan under
that family's exact method only where the input is the text counted, and the
sampled check of every exact column (``verify_output_units``, ``--verify``)."""

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
from ctxcompact.errors import ColumnTypeError, TranscriptError
from ctxcompact.scans import count_tokens_array, estimate_messages, verify_output_units
from ctxcompact.transcript import INPUT_HASH, UNITS_KEY, Transcript, exact_columns


def _table() -> pa.Table:
    table = generate_table(3, 30, seed=5, mean_output_chars=300)
    return Transcript.from_sessions(Transcript(table).to_sessions()).to_arrow()


def _exact(table: pa.Table, family: str = "o200k") -> list[int]:
    config = CompactionConfig(estimate_method=f"{family}-exact")
    return estimate_messages(table, config).messages.column("tokens").to_pylist()


def _set(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i).with_type(values.type), values)


def _calls(table: pa.Table) -> list[int]:
    return [i for i, v in enumerate(table.column("input").to_pylist()) if v]


def test_count_adds_each_calls_arguments_exactly() -> None:
    table = _table()
    counted = Transcript(table).count("o200k").to_arrow()
    want = count_tokens_array(pc.fill_null(table.column("input"), ""), "o200k")
    assert counted.column("input_tokens_o200k").to_pylist() == want.to_pylist()
    field = counted.schema.field("input_tokens_o200k")
    assert field.metadata == {UNITS_KEY.encode(): b"o200k-exact"}
    assert exact_columns(counted.schema) == {
        "output_tokens_o200k": ("o200k", "output", "output_hash"),
        "input_tokens_o200k": ("o200k", "input", INPUT_HASH),
    }
    assert _calls(table) and _exact(counted) == _exact(table)


def test_the_arguments_counts_are_read_where_the_input_is_the_text_counted() -> None:
    table = _table()
    counted = Transcript(table).count("o200k").to_arrow()
    calls = _calls(table)
    bumped = pc.add(counted.column("input_tokens_o200k"), 1000)
    # read: 1000 more for every call (a scan counting the text would not see it)
    forged = _set(counted, "input_tokens_o200k", bumped)
    assert sum(_exact(forged)) == sum(_exact(table)) + 1000 * len(calls)
    # not read once the input changed (its hash is the old text's)
    inputs = table.column("input").to_pylist()
    for i in calls:
        inputs[i] = inputs[i][:-1] + ', "more": "arguments added after counting"}'
    edited = pa.array(inputs, table.schema.field("input").type)
    stale = _set(forged, "input", edited)
    assert _exact(stale) == _exact(_set(table, "input", edited)) != _exact(table)
    # nor without the hashes, nor under another family
    assert _exact(forged.drop_columns([INPUT_HASH])) == _exact(table)
    assert _exact(forged, "cl100k") == _exact(table, "cl100k")
    # counting again counts the changed inputs only, and reads true again
    again = Transcript(stale).count("o200k").to_arrow()
    assert _exact(again) == _exact(_set(table, "input", edited))


@pytest.mark.parametrize("name", ["input_tokens_o200k", INPUT_HASH, "output_tokens_o200k"])
def test_a_count_column_of_another_type_is_a_column_type_error_naming_it(name: str) -> None:
    counted = Transcript(_table()).count("o200k").to_arrow()
    field = counted.schema.field(name)
    text = pc.cast(counted.column(name), pa.string())
    bad = counted.set_column(counted.schema.get_field_index(name), field.with_type(pa.string()),
                             text)  # fmt: skip
    with pytest.raises(ColumnTypeError, match=name) as e:
        _exact(bad)
    assert e.value.column == name


@pytest.mark.parametrize("name", ["output_tokens_o200k", "input_tokens_o200k"])
def test_verify_names_the_column_and_row_of_a_wrong_exact_count(name: str) -> None:
    counted = Transcript(_table()).count("o200k").to_arrow()
    verify_output_units(counted, sample=counted.num_rows)
    text = name.split("_")[0]
    row = max(range(counted.num_rows), key=lambda i: len(counted.column(text)[i].as_py() or ""))
    values = counted.column(name).to_pylist()
    values[row] += 1
    wrong = _set(counted, name, pa.array(values, pa.int64()))
    with pytest.raises(TranscriptError, match=rf"{name} of row {row} is") as e:
        verify_output_units(wrong, sample=wrong.num_rows)
    assert (e.value.column, e.value.row) == (name, row)
    # a row whose text changed is not read, so not wrong: no error
    texts = counted.column(text).to_pylist()
    texts[row] = texts[row] + " edited"
    edited = Transcript(wrong).with_column(text, texts)  # its other counts follow
    verify_output_units(edited, sample=edited.num_rows)
    # the sample is what is checked: none of the rows drawn is the wrong one
    verify_output_units(wrong, sample=counted.num_rows, exact_sample=0)


def test_cli_verify_samples_the_exact_counts_of_counted_parquet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    counted = Transcript(_table()).count("o200k").to_arrow()
    good = tmp_path / "good.parquet"
    pq.write_table(counted, good)
    code, _, err = invoke(monkeypatch, capsys, "estimate", str(good), "--verify",
                          "--method", "o200k-exact")  # fmt: skip
    assert code == 0, err
    row = _calls(counted)[-1]
    values = counted.column("input_tokens_o200k").to_pylist()
    values[row] = 0
    bad = tmp_path / "bad.parquet"
    pq.write_table(_set(counted, "input_tokens_o200k", pa.array(values, pa.int64())), bad)
    out_file = tmp_path / "out.parquet"
    for args in (["estimate"], ["batch", "-o", str(out_file)]):
        code, out, err = invoke(monkeypatch, capsys, *args, str(bad), "--verify",
                                "--method", "o200k-exact")  # fmt: skip
        assert code != 0 and not out_file.exists(), out
        assert f"input_tokens_o200k of row {row} is 0" in err and "bad.parquet" in err, err


def test_text_hashes_are_what_count_exact_parts_stores() -> None:
    counted = Transcript(_table()).count("o200k").to_arrow()
    hashes = pa.chunked_array(_core.text_hashes(counted.column("input"), None))
    assert pc.fill_null(hashes, 0).to_pylist() == counted.column(INPUT_HASH).to_pylist()


FIXTURE = Path(__file__).parents[1] / "fixtures" / "opencode_session.json"


def test_ingest_verify_recounts_the_written_exact_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ingest --count F --verify`` reads the file back before it replaces
    the output: a count wrong for its text is an error naming the file, the
    column and the row, and nothing is written."""
    import json

    import ctxcompact.cli.inputs as inputs

    out = tmp_path / "parts.parquet"
    code, text, err = invoke(monkeypatch, capsys, "ingest", str(FIXTURE), "-o", str(out),
                             "--count", "o200k", "--verify", "--json")  # fmt: skip
    assert code == 0, err
    report = json.loads(text)
    assert report["verified"] is True and report["count"] == ["o200k exact"]
    written = pq.read_table(out)
    row = max(range(written.num_rows), key=lambda i: len(written.column("output")[i].as_py() or ""))
    out.unlink()
    counted = inputs.count_exact_parts

    def miscounted(table: pa.Table, family: str, threads: int | None = None) -> pa.Table:
        table = counted(table, family, threads)
        values = table.column(f"output_tokens_{family}").to_pylist()
        if len(values) != written.num_rows:  # a window of no rows
            return table
        values[row] += 1
        return _set(table, f"output_tokens_{family}", pa.array(values, pa.int64()))

    monkeypatch.setattr(inputs, "count_exact_parts", miscounted)
    # without --verify the wrong count is written as it was made
    code, _, err = invoke(monkeypatch, capsys, "ingest", str(FIXTURE), "-o", str(out),
                          "--count", "o200k")  # fmt: skip
    assert code == 0, err
    out.unlink()
    code, text, err = invoke(monkeypatch, capsys, "ingest", str(FIXTURE), "-o", str(out),
                             "--count", "o200k", "--verify")  # fmt: skip
    assert code == 1, (text, err)
    assert f"{out}: output_tokens_o200k of row {row} is " in err and "TranscriptError" in err
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary file left


def test_ingest_verify_without_count_checks_the_counted_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    out = tmp_path / "parts.parquet"
    code, text, err = invoke(monkeypatch, capsys, "ingest", str(FIXTURE), "-o", str(out),
                             "--verify", "--json")  # fmt: skip
    assert code == 0, err
    report = json.loads(text)
    assert report["verified"] is True and report["count"] == []
    assert "output_utf16" in pq.read_table(out).column_names


@pytest.mark.parametrize(("method", "said"), [(None, "estimate opencode"),
                                              ("o200k-exact", "o200k exact"),
                                              ("o200k", "estimate o200k")])  # fmt: skip
def test_estimate_says_which_count_it_used(
    method: str | None, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    import json

    counted = tmp_path / "counted.parquet"
    pq.write_table(Transcript(_table()).count("o200k").to_arrow(), counted)
    given = [] if method is None else ["--method", method]
    code, text, err = invoke(monkeypatch, capsys, "estimate", str(counted), *given, "--json")
    assert code == 0, err
    assert json.loads(text)["count"] == said
