"""The command does not lose or invent data silently: conversions keep what
the scans read, a table without its text is refused where text is needed,
errors name the input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact.batch.synthetic import generate_table


def run(monkeypatch: Any, capsys: Any, *args: str) -> tuple[int, Any, str]:
    code, out, err = invoke(monkeypatch, capsys, *args)
    return code, (json.loads(out) if "--json" in args and code == 0 else out), err


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's demo data: part rows without message_json."""
    path = tmp_path_factory.mktemp("trust") / "gen.parquet"
    pq.write_table(generate_table(20, 100, seed=1), path)
    return path


def test_convert_keeps_the_pivot_of_a_table_without_message_json(
    generated: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    out = tmp_path / "gen.jsonl"
    assert run(monkeypatch, capsys, "convert", str(generated), str(out), "--to", "opencode")[0] == 0
    for command in ("filter", "estimate"):
        _, before, _ = run(monkeypatch, capsys, command, str(generated), "--json")
        _, after, _ = run(monkeypatch, capsys, command, str(out), "--json")
        before.pop("format", None)
        after.pop("format", None)
        before.pop("written", None)
        after.pop("written", None)
        assert after == before


@pytest.fixture(scope="module")
def textless(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Counted part rows (output_utf16) without the output text."""
    import ctxcompact as cc

    table = cc.Transcript.from_sessions(
        cc.Transcript(generate_table(6, 60, seed=3)).to_sessions()
    ).to_arrow()
    path = tmp_path_factory.mktemp("textless") / "nooutput.parquet"
    pq.write_table(table.drop_columns(["output"]), path)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("convert", "{i}", "{d}/o.jsonl", "--to", "opencode"),
        ("convert", "{i}", "{d}/o.json", "--to", "openai-chat"),
        ("replay", "{i}", "--context", "100000", "--output-limit", "4000"),
    ],
)
def test_a_table_without_text_is_refused_where_text_is_needed(
    textless: Path, tmp_path: Path, monkeypatch: Any, capsys: Any, args: tuple[str, ...]
) -> None:
    given = [a.format(i=textless, d=tmp_path) for a in args]
    code, out, err = run(monkeypatch, capsys, *given)
    assert code == 1, out
    assert "MissingColumnError" in err and str(textless) in err and "'output'" in err
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_counted_table_without_text_can_still_be_counted(
    textless: Path, monkeypatch: Any, capsys: Any
) -> None:
    for command in ("estimate", "prune", "filter"):
        assert run(monkeypatch, capsys, command, str(textless), "--json")[0] == 0


@pytest.mark.parametrize("command", ["estimate", "prune", "filter", "compact", "convert"])
def test_a_bad_parquet_error_names_the_file(
    tmp_path: Path, monkeypatch: Any, capsys: Any, command: str
) -> None:
    table = generate_table(2, 20, seed=1)
    bad = tmp_path / "badrole.parquet"
    roles = pa.array(["bogus"] * table.num_rows)
    pq.write_table(table.set_column(table.schema.get_field_index("role"), "role", roles), bad)
    extra = [str(tmp_path / "o.jsonl")] if command == "convert" else []
    code, _, err = run(monkeypatch, capsys, command, str(bad), *extra)
    assert code == 1 and f"{bad}: " in err and "bogus" in err
    lacking = tmp_path / "nosession.parquet"
    pq.write_table(table.drop_columns(["session_id"]), lacking)
    code, _, err = run(monkeypatch, capsys, command, str(lacking), *extra)
    assert code == 1 and f"{lacking}: " in err and "session_id" in err


@pytest.fixture(scope="module")
def stale(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """Counted part rows whose one tool output was emptied after counting."""
    import ctxcompact as cc

    table = cc.Transcript.from_sessions(
        cc.Transcript(generate_table(6, 60, seed=3)).to_sessions()
    ).to_arrow()
    outputs = table.column("output").to_pylist()
    kinds = table.column("part_type").to_pylist()
    row = max(i for i, (k, o) in enumerate(zip(kinds, outputs, strict=True)) if k == "tool" and o)
    outputs[row] = ""
    index = table.schema.get_field_index("output")
    path = tmp_path_factory.mktemp("stale") / "stale.parquet"
    pq.write_table(table.set_column(index, "output", pa.array(outputs, pa.large_string())), path)
    return path, row


@pytest.mark.parametrize(
    "args",
    [
        ("estimate", "{i}"),
        ("prune", "{i}"),
        ("compact", "{i}"),
        ("batch", "{i}", "--report", "{d}/r.parquet", "--batch-rows", "50"),
    ],
)
def test_verify_names_a_stale_count(
    stale: tuple[Path, int], tmp_path: Path, monkeypatch: Any, capsys: Any, args: tuple[str, ...]
) -> None:
    path, row = stale
    given = [a.format(i=path, d=tmp_path) for a in args]
    assert run(monkeypatch, capsys, *given, "--json")[0] == 0  # trusted without --verify
    (tmp_path / "r.parquet").unlink(missing_ok=True)
    code, _, err = run(monkeypatch, capsys, *given, "--verify", "--json")
    assert code == 1, err
    assert f"{path}: output_utf16 of row {row} is " in err and "stale" in err
    assert not (tmp_path / "r.parquet").exists()


def test_verify_passes_fresh_counts_and_needs_the_text(
    generated: Path, textless: Path, monkeypatch: Any, capsys: Any
) -> None:
    import ctxcompact as cc

    fresh = generated.with_name("fresh.parquet")
    pq.write_table(cc.scans.with_output_units(pq.read_table(generated)).to_arrow(), fresh)
    for command in ("estimate", "prune", "compact"):
        assert run(monkeypatch, capsys, command, str(fresh), "--verify", "--json")[0] == 0
    code, _, err = run(monkeypatch, capsys, "estimate", str(textless), "--verify")
    assert code == 1 and "MissingColumnError" in err and "--verify needs the output" in err


def _traj(path: Path) -> Path:
    """A SWE-agent text-protocol run of two steps (each: action, observation)."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for action in ("ls -la", "cat a.py"):
        history += [
            {"role": "assistant", "content": f"look\n```\n{action}\n```", "action": action},
            {"role": "user", "content": f"output of {action}"},
        ]
    path.write_text(json.dumps({"history": history, "trajectory": [], "info": {}}))
    return path


@pytest.mark.parametrize(
    ("to", "warned"),
    [("openai-chat", "2 tool call(s) of a text-protocol step written as plain text"),
     ("tau-bench", "2 tool call(s)"), ("mini-swe-agent", "2 tool call(s)"),
     ("swe-agent", None), ("anthropic", None), ("openai-responses", None), ("opencode", None)],
)  # fmt: skip
def test_convert_warns_when_the_target_loses_tool_calls(
    tmp_path: Path, monkeypatch: Any, capsys: Any, to: str, warned: str | None
) -> None:
    traj = _traj(tmp_path / "run.traj")
    out = tmp_path / "run.jsonl"
    code, said, err = run(monkeypatch, capsys, "convert", str(traj), str(out), "--to", to, "--json")
    assert code == 0 and out.exists()
    lost = said["lost"]  # --json says it too (it was on stderr only)
    if warned is None:
        assert "warning" not in err and lost == []
    else:
        assert f"warning: {to} cannot hold all of {traj}: {warned}" in err
        assert "in 1 session(s)" in err
        assert len(lost) == 1 and lost[0].startswith(warned) and lost[0] in err


def test_convert_warns_when_thinking_or_opencode_parts_are_dropped(
    generated: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    anthropic = tmp_path / "a.json"
    anthropic.write_text(json.dumps({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                          {"type": "text", "text": "hello"}]},
    ]}))  # fmt: skip
    code, _, err = run(monkeypatch, capsys, "convert", str(anthropic), str(tmp_path / "c.json"))
    assert code == 0 and "1 thinking part(s) dropped, in 1 session(s)" in err
    code, _, err = run(monkeypatch, capsys, "convert", str(anthropic), str(tmp_path / "k.jsonl"),
                       "--to", "claude-code")  # fmt: skip
    assert code == 0 and "warning" not in err
    code, _, err = run(monkeypatch, capsys, "convert", str(generated),
                       str(tmp_path / "g.jsonl"), "--to", "anthropic")  # fmt: skip
    assert code == 0 and "step-start part(s) dropped (OpenCode only), in 20 session(s)" in err
    assert "thinking" not in err


def test_a_missing_file_is_an_oserror_naming_it(tmp_path: Path) -> None:
    from ctxcompact import formats
    from ctxcompact.errors import InputTypeError
    from ctxcompact.formats.reader import read_sessions

    for read in (lambda p: read_sessions([p]), formats.read):
        for name in ("nope.jsonl", "nope.json"):
            with pytest.raises(FileNotFoundError) as e:
                read(tmp_path / name)
            assert e.value.filename == str(tmp_path / name)
    for given in (5, None, 1.5, b"{}"):
        with pytest.raises(InputTypeError, match="file path"):
            formats.read(given)


@pytest.mark.parametrize("command", ["estimate", "ingest", "convert"])
def test_the_cli_exits_3_for_a_missing_input(
    tmp_path: Path, monkeypatch: Any, capsys: Any, command: str
) -> None:
    missing = tmp_path / "nope.jsonl"
    extra = {"ingest": ["-o", str(tmp_path / "o.parquet")],
             "convert": [str(tmp_path / "o.jsonl")]}.get(command, [])  # fmt: skip
    code, _, err = run(monkeypatch, capsys, command, str(missing), *extra)
    assert code == 3 and str(missing) in err


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (("estimate", "-"), "INPUT"),
        (("convert", "-", "{d}/o.jsonl"), "INPUT"),
        (("convert", "{g}", "-"), "OUTPUT"),
        (("convert", "{g}", "-", "--to", "parquet"), "OUTPUT"),
        (("prune", "{g}", "--output", "-"), "--output"),
        (("compact", "{g}", "--report", "-"), "--report"),
        (("ingest", "-", "-o", "{d}/o.parquet"), "INPUT"),
        (("batch", "{g}", "-o", "-"), "--output"),
        (("replay", "-", "--context", "100000", "--output-limit", "4000"), "INPUT"),
    ],
)
def test_dash_is_refused_not_taken_as_a_file_name(
    generated: Path, tmp_path: Path, monkeypatch: Any, capsys: Any,
    args: tuple[str, ...], where: str,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    given = [a.format(g=generated, d=tmp_path) for a in args]
    code, _, err = run(monkeypatch, capsys, *given)
    stream = "stdin" if where == "INPUT" else "stdout"
    assert code == 2 and f"'-' ({stream}) is not supported" in err and where in err
    assert not (tmp_path / "-").exists() and not list(tmp_path.iterdir())


def test_an_output_without_a_suffix_is_named_as_given(
    generated: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # the temporary name gave it one: "not .tmp-1234" instead of "without a suffix"
    out = tmp_path / "outdir"
    code, _, err = run(monkeypatch, capsys, "convert", str(generated), str(out), "--to",
                       "openai-chat")  # fmt: skip
    assert code == 1 and not out.exists()
    assert "write a .jsonl file (a session per line), not one without a suffix" in err
    assert ".tmp-" not in err and "-tmp" not in err


# --- two outputs of one run: both replaced or neither -------------------------------------


def _second_rename_fails(monkeypatch: Any, second: Path) -> None:
    """Make the rename of ``second``'s temporary file onto it fail (putting
    the old file back still works), as ``compact_parquet``'s test does."""
    import os

    rename = os.replace

    def failing(src: Any, dst: Any) -> None:
        if Path(dst) == second and Path(src).name.startswith(f".{second.name}.tmp-"):
            raise PermissionError(13, "Permission denied", str(src), None, str(dst))
        rename(src, dst)

    monkeypatch.setattr(os, "replace", failing)


def _jsonl_with_a_bad_line(folder: Path) -> Path:
    from ctxcompact import formats
    from ctxcompact.transcript import Transcript

    src = folder / "in.jsonl"
    formats.write(Transcript(generate_table(3, 20, seed=2)).to_sessions(), src, "openai-chat")
    with src.open("ab") as f:
        f.write(b"not json\n")
    return src


@pytest.mark.parametrize("existed", [True, False])
@pytest.mark.parametrize("command", ["compact", "ingest", "tune"])
def test_a_failed_second_rename_leaves_both_outputs_as_they_were(
    command: str, existed: bool, generated: Path, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    first = out / "rows.parquet"
    if command == "compact":
        second, option = out / "report.parquet", "--report"
        argv = ["compact", str(generated), "--output", str(first), "--report", str(second)]
    elif command == "tune":
        grid = tmp_path / "grid.toml"
        grid.write_text('preset = ["opencode", "swe-agent"]\nmask_first = [true]\n')
        second, option = out / "report.html", "--report"
        argv = ["tune", str(generated), "--grid", str(grid), "--context", "20000",
                "--output-limit", "1000", "--workers", "1", "--out", str(first),
                "--report", str(second)]  # fmt: skip
    else:
        second, option = out / "rejects.jsonl", "--rejects"
        argv = ["ingest", str(_jsonl_with_a_bad_line(inputs)), "-o", str(first),
                "--on-error", "skip", "--rejects", str(second)]  # fmt: skip
    if existed:
        first.write_bytes(b"old first")
        second.write_bytes(b"old second")
    _second_rename_fails(monkeypatch, second)
    code, _, err = run(monkeypatch, capsys, *argv)
    assert code == 5 and len(err.strip().splitlines()) == 1, err
    assert f"{second}: cannot write {option}: Permission denied" in err
    if existed:
        assert first.read_bytes() == b"old first" and second.read_bytes() == b"old second"
        assert sorted(p.name for p in out.iterdir()) == sorted([first.name, second.name])
    else:
        assert list(out.iterdir()) == []  # neither written, no temporary file left
    monkeypatch.undo()
    code, _, err = run(monkeypatch, capsys, *argv)
    assert code == 0, err
    assert pq.read_table(first).num_rows > 0 and second.stat().st_size > 0
    assert sorted(p.name for p in out.iterdir()) == sorted([first.name, second.name])


def test_ingest_writes_a_linked_output_through_the_link(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    target, link = tmp_path / "target.parquet", tmp_path / "link.parquet"
    target.write_bytes(b"old")
    link.symlink_to(target)
    src = _jsonl_with_a_bad_line(tmp_path)
    code, _, err = run(monkeypatch, capsys, "ingest", str(src), "-o", str(link),
                       "--on-error", "skip")  # fmt: skip
    assert code == 0, err
    assert link.is_symlink() and pq.read_table(target).num_rows > 0


@pytest.mark.parametrize(
    "args",
    [
        ("estimate", "{i}"),
        ("prune", "{i}"),
        ("filter", "{i}"),
        ("compact", "{i}"),
        ("convert", "{i}", "{d}/out.jsonl"),
        ("replay", "{i}", "--context", "32000", "--output-limit", "4000", "--model", "gpt-4o"),
        ("tune", "{i}", "--grid", "{d}/grid.toml", "--output-limit", "4000", "--model", "gpt-4o"),
    ],
)
def test_format_on_parquet_inputs_is_refused_not_ignored(
    generated: Path, tmp_path: Path, monkeypatch: Any, capsys: Any, args: tuple[str, ...]
) -> None:
    """``--format`` names the session files' format: given with Parquet
    inputs only, it was accepted and ignored (exit 0, the rows read as rows)."""
    (tmp_path / "grid.toml").write_text('[grid]\npreset = ["opencode"]\ncontext = [32000]\n')
    given = [a.format(i=generated, d=tmp_path) for a in args]
    code, _, err = run(monkeypatch, capsys, *given, "--format", "tau-bench", "--json")
    assert code == 2, err
    assert "--format tau-bench" in err and "Parquet" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.toml"]  # nothing written
    # with a session file beside the Parquet, --format is its format, as before
    if args[0] == "estimate":
        first, second = tmp_path / "first.json", tmp_path / "second.json"
        for i, path in enumerate((first, second)):
            path.write_text(json.dumps([{"role": "user", "content": f"hi {i}"}]))
        rows = tmp_path / "first.parquet"
        assert run(monkeypatch, capsys, "ingest", str(first), "-o", str(rows))[0] == 0
        code, out, err = run(monkeypatch, capsys, "estimate", str(rows), str(second),
                             "--format", "openai-chat", "--json")  # fmt: skip
        assert code == 0, err
        assert (out["format"], out["sessions"]) == ("parquet, openai-chat", 2)
