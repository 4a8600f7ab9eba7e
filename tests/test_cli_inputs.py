"""Every command that reads data takes several files and folders (issue 37,
item 10), read as one by the same rules as ``ingest``: Parquet and session
inputs mixed, each folder one kind, a session in one input only, a bad or
missing input named, an output inside any input folder refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_run import invoke
from ctxcompact import formats
from ctxcompact.batch.synthetic import generate_table
from ctxcompact.transcript import Transcript

WINDOW = ["--context", "200000", "--output-limit", "8000"]


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    """Two folders of session files in two formats (2 sessions each) and a
    Parquet file of 2 more: no session in two of them."""
    sessions = Transcript(generate_table(6, 30, seed=1)).to_sessions()
    run_a, run_b = tmp_path / "runA", tmp_path / "runB"
    run_a.mkdir()
    run_b.mkdir()
    formats.write(sessions[:2], run_a / "a.jsonl", "openai-chat")
    formats.write(sessions[2:4], run_b / "b.jsonl", "anthropic")
    pq.write_table(Transcript.from_sessions(sessions[4:]).to_arrow(), tmp_path / "p.parquet")
    grid = tmp_path / "grid.toml"
    grid.write_text('[grid]\npreset = ["opencode"]\n')
    return {"a": run_a, "b": run_b, "parquet": tmp_path / "p.parquet", "grid": grid}


#: Each command reading data: (name, its arguments after the inputs, where
#: its output file goes as "{out}", the number of sessions read from its JSON).
COMMANDS: list[tuple[list[str], Any]] = [
    (["estimate"], lambda j: j["sessions"]),
    (["prune", "--output", "{out}"], lambda j: j["sessions"]),
    (["filter", "--output", "{out}"], lambda j: j["sessions"]),
    (["compact", "--output", "{out}"], lambda j: j["sessions"]),
    (["batch", "-o", "{out}"], lambda j: j["sessions"]),
    (["convert", "{out}", "--to", "parquet"], lambda j: j["sessions"]),
    (["convert", "{out}.jsonl", "--to", "openai-chat"], lambda j: j["sessions"]),
    (["replay", *WINDOW, "--out", "{out}"], lambda j: j["policies"][0]["sessions"]),
    (["tune", "--grid", "{grid}", *WINDOW, "--out", "{out}"],
     lambda j: j["policies"][0]["sessions"]),
]  # fmt: skip
IDS = ["estimate", "prune", "filter", "compact", "batch", "convert-parquet", "convert-jsonl",
       "replay", "tune"]  # fmt: skip


def argv(command: list[str], given: list[Path], tmp_path: Path, grid: Path) -> list[str]:
    """``command`` on ``given``: the inputs after the name (convert's OUTPUT after them)."""
    rest = [a.replace("{out}", str(tmp_path / "out.parquet")).replace("{grid}", str(grid))
            for a in command[1:]]  # fmt: skip
    return [command[0], *map(str, given), *rest]


@pytest.mark.parametrize(("command", "sessions"), COMMANDS, ids=IDS)
def test_every_command_reads_several_inputs_of_mixed_formats(
    inputs: dict[str, Path], tmp_path: Path, command: list[str], sessions: Any,
    monkeypatch: Any, capsys: Any,
) -> None:  # fmt: skip
    given = [inputs["a"], inputs["b"]]
    if command[0] != "convert" or "parquet" in command:  # JSONL out: a session format in
        given.append(inputs["parquet"])
    code, out, err = invoke(monkeypatch, capsys, *argv(command, given, tmp_path, inputs["grid"]),
                            "--json")  # fmt: skip
    assert code == 0, err
    assert sessions(json.loads(out)) == 2 * len(given)
    if command[0] == "estimate":
        assert json.loads(out)["format"] == "parquet, openai-chat, anthropic"


@pytest.mark.parametrize(("command", "sessions"), [*COMMANDS, (["ingest", "-o", "{out}"], None)],
                         ids=[*IDS, "ingest"])  # fmt: skip
def test_a_bad_or_missing_input_among_several_is_named(
    inputs: dict[str, Path], tmp_path: Path, command: list[str], sessions: Any,
    monkeypatch: Any, capsys: Any,
) -> None:  # fmt: skip
    out = tmp_path / "out.parquet"
    bad = inputs["b"] / "bad.jsonl"
    bad.write_text('{"messages": [\nnot json\n')
    both = argv(command, [inputs["a"], inputs["b"]], tmp_path, inputs["grid"])
    code, _, err = invoke(monkeypatch, capsys, *both)
    assert code == 1 and str(bad) in err, err
    assert not out.exists() and not Path(f"{out}.jsonl").exists()
    code, res, err = invoke(monkeypatch, capsys, *both, "--on-error", "skip", "--json")
    assert code == 0 and f"rejected: {bad}" in err, err
    if sessions is not None:
        assert sessions(json.loads(res)) == 4  # the rest is read
    out.unlink(missing_ok=True)
    Path(f"{out}.jsonl").unlink(missing_ok=True)
    bad.unlink()
    missing = tmp_path / "runC"
    code, _, err = invoke(
        monkeypatch, capsys, *argv(command, [inputs["a"], missing], tmp_path, inputs["grid"])
    )
    assert code == 3 and f"{missing}: no such file" in err, err
    assert not out.exists() and not Path(f"{out}.jsonl").exists()


@pytest.mark.parametrize(
    "command",
    [["ingest", "-o"], ["prune", "--output"], ["filter", "--output"], ["compact", "--report"],
     ["batch", "-o"], ["batch", "--report"], ["convert", "--to", "parquet"],
     ["replay", *WINDOW, "--out"]],
    ids=lambda c: "-".join(c[:2]),
)  # fmt: skip
def test_an_output_inside_either_input_folder_is_refused(
    inputs: dict[str, Path], tmp_path: Path, command: list[str], monkeypatch: Any, capsys: Any
) -> None:
    for folder in (inputs["a"], inputs["b"]):
        before = sorted(p.name for p in folder.iterdir())
        out = folder / "out.parquet"
        code, _, err = invoke(monkeypatch, capsys, command[0], str(inputs["a"]), str(inputs["b"]),
                              *command[1:], str(out))  # fmt: skip
        assert code == 2 and str(out) in err and f"input folder {folder}" in err, err
        assert sorted(p.name for p in folder.iterdir()) == before
    # and an output that cannot be written (no such folder): exit 5, nothing read
    out = tmp_path / "missing" / "out.parquet"
    code, _, err = invoke(monkeypatch, capsys, command[0], str(inputs["a"]), str(inputs["b"]),
                          *command[1:], str(out))  # fmt: skip
    assert code == 5 and str(out) in err and "does not exist" in err, err


def test_two_folders_whose_runs_get_the_same_ids_say_how_ids_are_formed(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # `ingest runA/trajs runB/trajs`: both name their sessions trajs/<file>
    # minus the suffix; the error says so, and what to give instead.
    traj = {"environment": "swe", "history": [{"role": "user", "content": "go"}],
            "trajectory": [], "info": {}}  # fmt: skip
    for run in ("runA", "runB"):
        (tmp_path / run / "trajs").mkdir(parents=True)
        (tmp_path / run / "trajs" / "task-1.traj").write_text(json.dumps(traj))
    out = tmp_path / "o.parquet"
    code, _, err = invoke(monkeypatch, capsys, "ingest", str(tmp_path / "runA" / "trajs"),
                          str(tmp_path / "runB" / "trajs"), "-o", str(out))  # fmt: skip
    assert code == 1 and "DuplicateSessionError" in err and "'task-1'" in err, err
    assert "path relative to the folder given" in err and "give the folder that holds" in err
    assert not out.exists()
    code, res, err = invoke(monkeypatch, capsys, "ingest", str(tmp_path / "runA"),
                            str(tmp_path / "runB"), "-o", str(out), "--json")  # fmt: skip
    assert code == 1 and "'trajs/task-1'" in err  # still the same relative paths
    code, res, err = invoke(monkeypatch, capsys, "ingest", str(tmp_path), "-o",
                            str(tmp_path / "_o.parquet"), "--json")  # fmt: skip
    assert code == 0 and json.loads(res)["sessions"] == 2, err


def test_two_tau_bench_result_files_say_their_run_ids_repeat_across_files(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # an airline and a retail results file both number their tasks from 0: the
    # error said "the same run given twice?", which they are not
    run = {"task_id": 0, "trial": 0, "reward": 1.0, "info": {},
           "traj": [{"role": "user", "content": "book a flight"}]}  # fmt: skip
    folder = tmp_path / "results"
    folder.mkdir()
    for domain in ("airline", "retail"):
        (folder / f"gpt-4o-{domain}.json").write_text(json.dumps([run]))
    out = tmp_path / "o.parquet"
    code, _, err = invoke(monkeypatch, capsys, "ingest", str(folder), "-o", str(out))
    assert code == 1 and "DuplicateSessionError" in err and "'tau-0-0'" in err, err
    assert "tau-<task_id>-<trial>" in err and "unique within one results file only" in err
    assert "the same run given twice" not in err and not out.exists()
    code, _, err = invoke(monkeypatch, capsys, "estimate", str(folder / "gpt-4o-airline.json"))
    assert code == 0, err  # each file on its own reads


def test_batch_names_a_session_in_parquet_and_session_files_by_their_names(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    ingested = tmp_path / "a.parquet"
    assert invoke(monkeypatch, capsys, "ingest", str(inputs["a"]), "-o", str(ingested))[0] == 0
    code, _, err = invoke(monkeypatch, capsys, "batch", str(ingested), str(inputs["a"]),
                          "--report", str(tmp_path / "r.parquet"))  # fmt: skip
    assert code == 1 and "DuplicateSessionError" in err, err
    assert str(ingested) in err and f"the session files ({inputs['a']})" in err
    assert "ctxcompact-" not in err  # not the temporary file's name


def test_convert_reads_format_and_its_old_name_from(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # Issue 37, item 11: convert's --from is --format, as everywhere else.
    out = tmp_path / "o.jsonl"
    for option in ("--format", "--from"):
        code, res, err = invoke(monkeypatch, capsys, "convert", str(inputs["a"]), str(out),
                                option, "openai-chat", "--json")  # fmt: skip
        assert code == 0 and json.loads(res)["sessions"] == 2, err
    code, _, err = invoke(monkeypatch, capsys, "convert", str(inputs["a"]), str(out),
                          "--format", "openai-chat", "--from", "anthropic")  # fmt: skip
    assert code == 2 and "--from is --format's old name" in err
    code, help_text, _ = invoke(monkeypatch, capsys, "convert", "--help")
    assert "--format" in help_text and "--from" not in help_text


@pytest.mark.parametrize(("command", "sessions"), COMMANDS, ids=IDS)
def test_a_dictionary_encoded_column_beside_plain_strings_is_read(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: Any, capsys: Any,
    command: list[str], sessions: Any,
) -> None:  # fmt: skip
    """A Parquet whose ``session_id`` is dictionary-encoded (polars'
    categoricals, the demo's generator) beside session files or a Parquet of
    plain strings: every command but batch refused the pair ("the inputs'
    columns do not agree"), though each read alone."""
    coded = tmp_path / "coded"
    coded.mkdir()
    table = generate_table(3, 30, seed=7)
    i = table.schema.get_field_index("session_id")
    assert pa.types.is_dictionary(table.schema.field(i).type)
    ids = pa.array([f"coded-{s}" for s in table.column(i).to_pylist()]).dictionary_encode()
    table = table.set_column(i, "session_id", ids)  # ids of its own, still encoded
    pq.write_table(table, coded / "c.parquet")
    for given in ([coded / "c.parquet", inputs["a"]], [coded / "c.parquet", inputs["parquet"]]):
        args = argv(command, given, tmp_path, inputs["grid"])
        code, out, err = invoke(monkeypatch, capsys, *args, "--json")
        assert code == 0, err
        assert sessions(json.loads(out)) == 5
    # the same files in one folder (read as one dataset)
    pq.write_table(pq.read_table(inputs["parquet"]), coded / "p.parquet")
    args = argv(command, [coded], tmp_path, inputs["grid"])
    code, out, err = invoke(monkeypatch, capsys, *args, "--json")
    assert code == 0, err
    assert sessions(json.loads(out)) == 5
