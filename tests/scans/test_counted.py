"""Counted once: every table the library makes carries ``output_utf16``, each
output's UTF-16 length counted while its text was at hand, and keeps it true;
a tokenizer family's counts (``output_units_<family>``) are read only when
made with this release's table."""

from __future__ import annotations

from pathlib import Path

import ctxcompact as cc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ctxcompact.batch.parquet import compact_parquet
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ConfigError, MissingColumnError, TranscriptError
from ctxcompact.formats.reader import read_sessions
from ctxcompact.models import Session
from ctxcompact.scans import prune, verify_output_units, with_output_units
from ctxcompact.transcript import OUTPUT_UNITS, UNITS_KEY, Transcript, counted_columns

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def generate_sessions(sessions: int, parts: int, seed: int) -> list[Session]:
    table = generate_table(sessions, parts, seed=seed, mean_output_chars=300)
    return Transcript(table).to_sessions()


def utf16_units(text: str | None) -> int:
    """JavaScript's ``length``, independently of the Rust count (a null
    output is counted 0, as it is measured: the column has no null)."""
    return 0 if text is None else len(text.encode("utf-16-le")) // 2


def assert_counted(table: pa.Table) -> None:
    assert table.schema.field(OUTPUT_UNITS).type == pa.int64()
    want = [utf16_units(t) for t in table.column("output").to_pylist()]
    assert table.column(OUTPUT_UNITS).to_pylist() == want


@pytest.mark.skipif(not (DATA / "transcripts").is_dir(), reason="no ../shared/data")
@pytest.mark.parametrize("folder", ["transcripts", "formats"])
def test_the_readers_count_every_output_of_the_shared_data(folder: str) -> None:
    result = read_sessions(DATA / folder, on_error="skip")
    assert result.table.num_rows > 30
    assert_counted(result.table)


def test_sessions_made_into_a_table_are_counted_with_non_ascii_and_surrogate_pairs() -> None:
    sessions = generate_sessions(3, 12, seed=4)
    part = sessions[0].messages[1].parts[0]
    if hasattr(part, "text"):
        part.text = "héllo 😀 wörld\r\n\t" * 7
    table = Transcript.from_sessions(sessions).to_arrow()
    assert_counted(table)
    assert table.column(OUTPUT_UNITS).null_count == 0  # statistics prove it counted


def test_replacing_the_outputs_counts_them_again() -> None:
    transcript = Transcript.from_sessions(generate_sessions(2, 10, seed=1))
    table = transcript.to_arrow()
    shorter = pa.array([None if t is None else t[:3] + "😀" for t in table["output"].to_pylist()],
                       pa.large_string())  # fmt: skip
    replaced = transcript.with_column("output", shorter).to_arrow()
    assert_counted(replaced)
    assert replaced.column_names == table.column_names
    # Any other column leaves the counts as they were.
    other = transcript.with_column("tool", table["tool"]).to_arrow()
    assert other[OUTPUT_UNITS].equals(table[OUTPUT_UNITS])


def test_a_stale_count_is_caught_by_verify_and_a_fresh_one_changes_nothing() -> None:
    table = Transcript.from_sessions(generate_sessions(4, 30, seed=2)).to_arrow()
    verify_output_units(table, sample=table.num_rows)
    counted = prune(table, "aggressive")
    measured = prune(table.drop_columns([OUTPUT_UNITS]), "aggressive")
    assert counted.rows.equals(measured.rows) and counted.total == measured.total > 0
    index = table.schema.get_field_index(OUTPUT_UNITS)
    stale = table.set_column(index, OUTPUT_UNITS, pa.array([7] * table.num_rows, pa.int64()))
    with pytest.raises(TranscriptError, match="stale"):
        verify_output_units(stale, sample=table.num_rows)


def test_parquet_files_with_and_without_counts_compact_alike_in_either_order(
    tmp_path: Path,
) -> None:
    whole = Transcript.from_sessions(generate_sessions(12, 40, seed=5)).to_arrow()
    ids = whole["session_id"].to_pylist()
    cut = ids.index(ids[len(ids) // 2])  # a session boundary near the middle
    first, second = whole.slice(0, cut), whole.slice(cut)
    cfg = CompactionConfig(policy="aggressive")
    reports = []
    for order, (x, y) in enumerate([(first, second.drop_columns([OUTPUT_UNITS])),
                                    (first.drop_columns([OUTPUT_UNITS]), second),
                                    (first, second)]):  # fmt: skip
        folder = tmp_path / f"d{order}"
        folder.mkdir()
        pq.write_table(x, folder / "1.parquet")
        pq.write_table(y, folder / "2.parquet")
        for dest in (None, tmp_path / f"out{order}.parquet"):
            report = tmp_path / f"r{order}{dest is None}.parquet"
            compact_parquet(folder, dest, cfg, report_path=report, now_ms=1)
            reports.append(pq.read_table(report))
    assert all(r.equals(reports[0]) for r in reports)
    assert sum(reports[0]["tokens_pruned"].to_pylist()) > 0


@pytest.mark.parametrize("method", ["o200k", "qwen-conservative"])
def test_a_family_counted_once_gives_what_its_texts_give_and_needs_no_text(method: str) -> None:
    table = Transcript.from_sessions(generate_sessions(5, 40, seed=8)).to_arrow()
    counted = with_output_units(table, method=method).to_arrow()
    family = method.removesuffix("-conservative")
    field = counted.schema.field(f"output_units_{family}")
    assert field.metadata[UNITS_KEY.encode()].startswith(f"{family}:".encode())
    assert counted.column(field.name).null_count == 0
    cfg = CompactionConfig(policy="aggressive", estimate_method=method)
    want = prune(table.drop_columns([OUTPUT_UNITS]), cfg)
    assert want.pruned > 0
    lean = counted.drop_columns(["output", OUTPUT_UNITS])
    for got in (prune(counted, cfg), prune(lean, cfg)):
        assert got.rows.equals(want.rows) and got.total == want.total
    # Without its family's counts, a table without text cannot be estimated.
    with pytest.raises(MissingColumnError, match="no counts made with it"):
        prune(lean, CompactionConfig(estimate_method="cl100k"))
    with pytest.raises(ConfigError, match="no counted column"):
        with_output_units(table, method="ceil-bytes")
    with pytest.raises(ConfigError, match="unknown estimate method"):
        with_output_units(table, method="gpt2")


def test_counts_made_with_another_table_are_measured_again_or_refused() -> None:
    table = Transcript.from_sessions(generate_sessions(5, 40, seed=9)).to_arrow()
    counted = with_output_units(table, method="o200k").to_arrow()
    index = counted.schema.get_field_index("output_units_o200k")
    # An older table's counts (its fingerprint differs), and wrong besides.
    old = pa.field("output_units_o200k", pa.int64(), metadata={UNITS_KEY: "o200k:0000"})
    stale = counted.set_column(index, old, pa.array([1] * counted.num_rows, pa.int64()))
    cfg = CompactionConfig(policy="aggressive", estimate_method="o200k")
    want = prune(table, cfg)
    got = prune(stale, cfg)
    assert got.rows.equals(want.rows) and got.total == want.total
    assert counted_columns(stale.schema) == {OUTPUT_UNITS: "opencode"}
    verify_output_units(stale, sample=stale.num_rows)  # not read, so not checked
    with pytest.raises(MissingColumnError, match="no counts made with it"):
        prune(stale.drop_columns(["output"]), cfg)
    # The same table's counts, wrong: verify names the row.
    wrong = counted.set_column(index, counted.schema.field(index),
                               pa.array([1] * counted.num_rows, pa.int64()))  # fmt: skip
    with pytest.raises(TranscriptError, match="output_units_o200k of row 0 is 1, but"):
        verify_output_units(wrong, sample=wrong.num_rows)
    # New outputs are counted again under every family present.
    short = pa.array(["é" if t else t for t in table["output"].to_pylist()], pa.large_string())
    again = Transcript(counted).with_column("output", short).to_arrow()
    verify_output_units(again, sample=again.num_rows)
    assert again.schema.field("output_units_o200k").metadata == field_of(counted).metadata


#: What ``output_units_<family>`` was stamped with under these families'
#: earlier tables (FNV-1a of each built-in table's bytes): before their refit
#: with the digit and punctuation weights, and before the refit on every
#: content type (stop 51; qwen, tekken and deepseek stop 52), and before the
#: refit on the scripts no fit had read (stop 52).
EARLIER_TABLES = [
    ("llama3", "llama3:56980402407c48c4"),
    ("qwen", "qwen:765fa5c6a4865765"),
    ("tekken", "tekken:62e1f07d85cf4882"),
    ("deepseek", "deepseek:1c93b182042d70d4"),
    ("o200k", "o200k:841b3973f66b6a91"),
    ("cl100k", "cl100k:9a9ec601b03607c1"),
    ("llama3", "llama3:51db0f62e3c62d55"),
    ("qwen", "qwen:11f252521c3b7afd"),
    ("tekken", "tekken:652783561b3e455d"),
    ("deepseek", "deepseek:1b2064f4b63e3d7d"),
    ("o200k", "o200k:a716817057b9cd5e"),
    ("cl100k", "cl100k:26cfad23f47d2f78"),
    ("llama3", "llama3:d629ff7877e3845a"),
    ("qwen", "qwen:95fafce2f98d7472"),
    ("tekken", "tekken:d96e1d5c2c0263f7"),
    ("deepseek", "deepseek:63a3b538c8a66c18"),
]


@pytest.mark.parametrize(("family", "earlier"), EARLIER_TABLES)
def test_counts_made_with_the_earlier_refit_tables_are_not_read(family: str, earlier: str) -> None:
    table = Transcript.from_sessions(generate_sessions(3, 20, seed=4)).to_arrow()
    counted = with_output_units(table, method=family).to_arrow()
    column = f"output_units_{family}"
    stamp = counted.schema.field(column).metadata[UNITS_KEY.encode()].decode()
    assert stamp != earlier
    index = counted.schema.get_field_index(column)
    old = pa.field(column, pa.int64(), metadata={UNITS_KEY: earlier})
    stale = counted.set_column(index, old, pa.array([1] * counted.num_rows, pa.int64()))
    assert counted_columns(stale.schema) == {OUTPUT_UNITS: "opencode"}
    cfg = CompactionConfig(policy="aggressive", estimate_method=family)
    want = prune(table, cfg)
    got = prune(stale, cfg)
    assert got.rows.equals(want.rows) and got.total == want.total
    with pytest.raises(MissingColumnError, match="no counts made with it"):
        prune(stale.drop_columns(["output"]), cfg)


def field_of(table: pa.Table) -> pa.Field:
    return table.schema.field("output_units_o200k")


def test_a_familys_report_reads_the_text_its_message_estimates_join(tmp_path: Path) -> None:
    """A family's estimate of a message reads its texts joined, which the
    per-output counts cannot give: a report-only run reads the text, and a
    table without it is refused rather than estimated without its outputs."""
    table = Transcript.from_sessions(generate_sessions(8, 60, seed=3)).to_arrow()
    counted = with_output_units(table, method="tekken").to_arrow()
    for name, data in [("plain", table), ("counted", counted)]:
        (tmp_path / name).mkdir()
        pq.write_table(data, tmp_path / name / "rows.parquet")
    cfg = CompactionConfig(policy="aggressive", estimate_method="tekken")
    stats = {}
    for name in ("plain", "counted"):
        report = tmp_path / f"{name}.report.parquet"
        stats[name] = compact_parquet(tmp_path / name, None, cfg, report_path=report, now_ms=1)
    assert pq.read_table(tmp_path / "plain.report.parquet").equals(
        pq.read_table(tmp_path / "counted.report.parquet"))  # fmt: skip
    assert stats["counted"].tokens_pruned == stats["plain"].tokens_pruned > 0
    lean = counted.drop_columns(["output"])
    with pytest.raises(MissingColumnError, match="read the texts of a message joined"):
        cc.estimate_messages(lean, cfg)
    with pytest.raises(MissingColumnError, match="read the texts of a message joined"):
        prune(lean, CompactionConfig(policy={"preset": "aggressive", "trigger": 10},
                                     estimate_method="tekken"))  # fmt: skip
    # Prune alone estimates each output by itself: the counts are enough.
    assert prune(lean, cfg).rows.equals(prune(table, cfg).rows)


def test_a_count_missing_where_an_output_is_makes_a_report_read_the_text(tmp_path: Path) -> None:
    table = Transcript.from_sessions(generate_sessions(6, 40, seed=12)).to_arrow()
    index = table.schema.get_field_index(OUTPUT_UNITS)
    values = table[OUTPUT_UNITS].to_pylist()
    first = next(i for i, v in enumerate(values) if v)
    values[first] = None  # measured from its text: a report must read the text
    holed = table.set_column(index, table.schema.field(index), pa.array(values, pa.int64()))
    pq.write_table(holed, tmp_path / "rows.parquet")
    cfg = CompactionConfig(policy="aggressive")
    lean = compact_parquet(tmp_path / "rows.parquet", None, cfg, report_path=tmp_path / "a.pq")
    full = compact_parquet(tmp_path / "rows.parquet", tmp_path / "parts.parquet", cfg,
                           report_path=tmp_path / "b.pq")  # fmt: skip
    assert pq.read_table(tmp_path / "a.pq").equals(pq.read_table(tmp_path / "b.pq"))
    assert lean.tokens_before == full.tokens_before and lean.bytes_read == full.bytes_read
