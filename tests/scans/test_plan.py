"""``plan``: one native call for a policy's whole plan (rust/src/plan.rs),
checked against the separate scans (prune, mark, pivot, sent_messages,
render_chat) on every session of the shared corpus, and against the
pure-Python reference on generated transcripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow as pa
import pytest
from ctxcompact import _core, formats
from ctxcompact.config import CompactionConfig
from ctxcompact.errors import ColumnTypeError, ConfigError
from ctxcompact.estimators import METHODS
from ctxcompact.policy import Policy
from ctxcompact.scans import reference as ref
from ctxcompact.scans import reference_shapes as ref_shapes
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sweeps import sweep
from test_differential import POLICY_OPTIONS, transcripts

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
CORPUS = sorted(
    p for p in DATA.rglob("*") if p.is_file() and p.suffix in {".json", ".jsonl", ".traj"}
)
REJECTED = {"edge_cases.jsonl"}
POLICIES: list[Any] = [None, "swe-agent", Policy(clear_inputs=True, truncate_output=200,
                       placeholder="describe", keep_thinking=2, turn="step",
                       protect_turns=0, protect=0, minimum=0, keep_recent=1)]  # fmt: skip


def _separately(table: pa.Table, policy: Any, shape: str) -> dict[str, Any]:
    """What the separate public scans say, one after another."""
    pruned = cc.prune(table, policy)
    marked = cc.mark_pruned(table, pruned, now_ms=1).to_arrow()
    mask = cc.scans.pivot_mask(marked).to_pylist()
    options = (Policy() if policy is None else Policy.load(policy)).render_options()
    rows, tokens, _kinds, _sessions = _core.sent_messages(marked, **options)
    per_row = [0] * table.num_rows
    for row, n in zip(pa.array(rows).to_pylist(), pa.array(tokens).to_pylist(), strict=True):
        per_row[row] += n
    visible = cc.filter_pivot(marked).to_arrow()
    model: dict[str, list[Any]] = {}
    for session in cc.Transcript(visible).to_sessions():
        model[session.id] = cc.to_model_messages(session, policy=policy, shape=shape)
    return {"pruned": pruned, "mask": mask, "tokens": per_row, "model": model}


def _check(table: pa.Table, policy: Any, shape: str) -> None:
    got = cc.plan(table, policy, shape=shape)
    want = _separately(table, policy, shape)
    parts = got.parts
    assert parts.column("visible").to_pylist() == want["mask"]
    assert parts.column("tokens").to_pylist() == want["tokens"]
    pruned_rows = set(want["pruned"].rows.to_pylist())
    assert [i for i, p in enumerate(parts.column("pruned").to_pylist()) if p] == sorted(pruned_rows)
    assert (
        got.sessions.column("pruned").to_pylist() == want["pruned"].sessions["pruned"].to_pylist()
    )
    assert got.sessions.column("tokens").to_pylist() == [
        sum(want["tokens"][a:a + n])
        for a, n in zip(got.sessions["first_row"].to_pylist(), got.sessions["parts"].to_pylist(),
                        strict=True)
    ]  # fmt: skip
    assert got.sessions.column("visible_tokens").to_pylist() == [
        sum(t for t, v in zip(want["tokens"][a:a + n], want["mask"][a:a + n], strict=True) if v)
        for a, n in zip(got.sessions["first_row"].to_pylist(), got.sessions["parts"].to_pylist(),
                        strict=True)
    ]  # fmt: skip
    for i, sid in enumerate(got.sessions.column("session_id").to_pylist()):
        messages = got.messages(i)
        expected = want["model"][sid]
        if shape == "anthropic":  # to_model_messages lifts the system prompt
            system = [m for m in messages if m["role"] == "system"]
            lifted = [{"type": "text", "text": m["content"]} for m in system]
            assert expected.get("system", []) == lifted
            expected = expected["messages"]
            messages = [m for m in messages if m["role"] != "system"]
        assert messages == expected, sid
    # A cleared part is one the prune marked now or that was marked before.
    fates = parts.column("fate").to_pylist()
    assert all(fates[r] == "cleared" for r in pruned_rows)


@pytest.mark.skipif(not CORPUS, reason="needs /work/shared/data")
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(DATA)))
def test_the_plan_is_the_separate_scans_on_every_corpus_session(path: Path) -> None:
    if path.name in REJECTED:
        return
    sessions = formats.read(path)
    table = cc.Transcript.from_sessions(sessions).to_arrow()
    for policy, shape in zip(POLICIES, ["chat", "responses", "anthropic"], strict=True):
        _check(table, policy, shape)


def test_the_arrow_output_holds_the_json_outputs_messages() -> None:
    path = next((p for p in CORPUS if p.name not in REJECTED), None)
    if path is None:
        pytest.skip("needs /work/shared/data")
    table = cc.Transcript.from_sessions(formats.read(path)).to_arrow()
    for shape in ("chat", "anthropic", "responses"):
        as_json = cc.plan(table, "swe-agent", shape=shape)
        as_arrow = cc.plan(table, "swe-agent", shape=shape, output="arrow")
        model = as_arrow.model_input
        assert isinstance(model, pa.Table)
        assert model.column_names == ["session_id", "index", "message", "role", "json"]
        for i in range(as_json.sessions.num_rows):
            assert as_arrow.messages(i) == as_json.messages(i)
        roles = [json.loads(t).get("role") for t in model.column("json").to_pylist()]
        assert model.column("role").to_pylist() == roles


@settings(max_examples=sweep(200), deadline=None)
@given(transcripts(), POLICY_OPTIONS, st.sampled_from(METHODS), st.integers(0, 6))
def test_the_plan_matches_reference(
    data: tuple[list[dict[str, Any]], pa.Table],
    options: dict[str, Any],
    method: str,
    overhead: int,
) -> None:
    """Generated transcripts under random policies: the prune, the pivot, the
    per-message estimates of the marked rows and the rendered visible
    messages are the reference's."""
    rows, table = data
    config = CompactionConfig(policy=Policy(**options), estimate_method=method,
                              message_overhead=overhead)  # fmt: skip
    got = cc.plan(table, config, shape="chat")
    kwargs = {**options, "protected_tools": options["exclude_tools"]}
    del kwargs["exclude_tools"]
    render = {k: kwargs[k] for k in ("clear_inputs", "truncate_output", "placeholder")}
    keep = kwargs["keep_thinking"]
    want = ref.prune(rows, **kwargs, method=method, overhead=overhead)
    selected = {r for w in want for r in w.rows}
    assert got.parts.column("pruned").to_pylist() == [i in selected for i in range(len(rows))]
    marked = [{**r, "compacted_at": 1} if i in selected else r for i, r in enumerate(rows)]
    # tokens: per message, the reference's estimate of the marked rows
    per_message: dict[int, int] = {}
    firsts = ref.estimate_messages(marked, method=method, overhead=overhead, **render,
                                   keep_thinking=keep)  # fmt: skip
    starts = [first for first, _ in firsts]
    tokens = got.parts.column("tokens").to_pylist()
    for i, n in enumerate(tokens):
        owner = max((s for s in starts if s <= i), default=None)
        if owner is not None:
            per_message[owner] = per_message.get(owner, 0) + n
    assert {s: per_message.get(s, 0) for s in starts} == dict(firsts)
    # visibility, and the model input of what is shown
    shown = ref.shown_messages(marked)
    visible = [False] * len(rows)
    for session in shown:
        for message in session:
            for r in message.rows:
                visible[r] = True
    for group in ref.group(rows):  # an empty session's one row is shown
        if not group.messages:
            visible[group.rows[0]] = True
    assert got.parts.column("visible").to_pylist() == visible
    for s, session in enumerate(shown):
        kept = [marked[r] for m in session for r in m.rows]
        want_model = [m for one in ref.render_chat(kept, keep_thinking=keep, **render)
                      for m in one] if kept else []  # fmt: skip
        assert got.messages(s) == want_model
        as_anthropic = cc.plan(table, config, shape="anthropic").messages(s)
        chat_per_message = ref.render_chat(kept, keep_thinking=keep, **render) if kept else []
        flat = [m for one in chat_per_message for m in one]
        # turns of one role merged across messages (and across a system
        # message, which stays in place for the caller to lift)
        assert [m for m in as_anthropic if m["role"] != "system"] == ref_shapes.to_anthropic(
            [m for m in flat if m["role"] != "system"]
        )
        assert [m for m in as_anthropic if m["role"] == "system"] == [
            m for m in flat if m["role"] == "system"
        ]


def _small() -> pa.Table:
    session = cc.Session.model_validate({"info": {"id": "s"}, "messages": [
        {"info": {"id": "u1", "role": "user"}, "parts": [{"id": "t1", "type": "text",
                                                          "text": "fix it"}]},
    ]})  # fmt: skip
    return cc.Transcript.from_sessions([session]).to_arrow()


@pytest.mark.parametrize("shape", ["gemini", "", "Chat", 3])
def test_an_unknown_shape_is_a_config_error_naming_shape(shape: Any) -> None:
    with pytest.raises(ConfigError, match="shape") as caught:
        cc.plan(_small(), shape=shape)
    assert caught.value.column == "shape"
    if isinstance(shape, str):
        # the one check is the core's (shapes::Shape::parse): its error names the argument
        with pytest.raises(ConfigError, match="unknown shape") as caught:
            _core.plan(_small(), None, shape=shape)
        assert caught.value.column == "shape"


def test_an_unknown_output_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="output"):
        cc.plan(_small(), shape="chat", output="parquet")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="output"):
        _core.plan(_small(), None, shape="chat", output="parquet")


def test_a_column_of_the_wrong_type_is_named() -> None:
    table = _small()
    index = table.schema.get_field_index("output")
    table = table.set_column(index, "output", pa.array([1] * table.num_rows, pa.int64()))
    with pytest.raises(ColumnTypeError) as caught:
        _core.plan(table, None, shape="chat")
    assert caught.value.column == "output"
    assert "Int64" in str(caught.value)


def test_a_session_plans_as_its_table() -> None:
    session = cc.Transcript(_small()).to_sessions()[0]
    assert cc.plan(session, shape="chat").messages(0) == cc.to_model_messages(session)


def test_the_bindings_part_columns_are_the_ones_the_plan_reads() -> None:
    """The binding built a per-part session-index column nothing read (the
    plan names each part's session from its own ``session_id`` column)."""
    table = _small()
    parts, _, _ = _core.plan(table, None)
    got = cc.plan(table).parts
    assert len(parts) == len(got.column_names) - 3  # session_id, message_id, visible: the table's
    columns = [pa.array(c).to_pylist() for c in parts]
    assert columns[0] == got.column("message").to_pylist()
    assert columns[-1] == got.column("tokens").to_pylist()
