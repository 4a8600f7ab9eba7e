"""One self-contained HTML page of a policy grid (``pip install 'ctxcompact[report]'``).

The page needs no network to open: the plots are SVG drawn by matplotlib and
inlined, the styles are inline, there is no script. It shows the per-point
table (a cost column per price sheet), the cost-vs-retention front (one plot
per price sheet) with the presets and a searched policy marked (``Mark``),
the usage the runs recorded beside the replay's baseline, prompt tokens per
call over the steps of a typical and the worst session (with and without
each policy on the front), where compactions fire along the runs, and the
facts lost most often.
"""

from __future__ import annotations

import html
import io
import os
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact._atomic import replacing
from ctxcompact.errors import ConfigError
from ctxcompact.policy import PRESETS
from ctxcompact.tuning.grid import CONFIG_KEYS, WINDOW_KEYS, Tuning, pareto
from ctxcompact.tuning.recorded import recorded_totals
from ctxcompact.tuning.replay import per_session_table
from ctxcompact.tuning.retention import ranked, shown_score


def pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: draw to files only
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ConfigError(
            "the HTML report needs matplotlib: pip install 'ctxcompact[report]'"
        ) from None
    return plt


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    with warnings.catch_warnings():
        # Text the bundled font cannot draw (CJK in a lost fact) shows as boxes.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.savefig(buf, format="svg", bbox_inches="tight")
    pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog: inlined in HTML


def retention_of(points: pa.Table) -> list[float]:
    """Each point's retention: the ``retention`` column, else the pooled
    ``compaction_retention``."""
    name = "retention" if "retention" in points.column_names else "compaction_retention"
    return [float(v) for v in points[name].to_pylist()]


def sheets_of(tuning: Tuning) -> list[str]:
    """The price sheets' models, the first (weighed on the front) first."""
    return list(next(iter(tuning.summaries.values()), {}).get("costs") or {})


@dataclass(frozen=True)
class Series:
    """What one front plot weighs: the x axis's label, each point's x, and
    which points are on that front."""

    label: str
    xs: list[float]
    front: list[bool]
    sheet: str | None = None


def _cost_axis(points: pa.Table, axis: str | None = None) -> tuple[str, list[float]]:
    costs = points["cost"].to_pylist()
    if axis == "cost" or (axis is None and all(c is not None for c in costs)):
        return "cost (USD)", [float(c) for c in costs]
    return "prompt tokens", [float(t) for t in points["prompt_tokens"].to_pylist()]


def series(tuning: Tuning) -> list[Series]:
    """A front per price sheet: the first the tuning's own (``pareto``), each
    other sheet's over its costs; one on prompt tokens when not priced."""
    points = tuning.points
    sheets = sheets_of(tuning)
    label, xs = _cost_axis(points, tuning.axis)
    first = Series(label if not sheets else f"cost under {sheets[0]} (USD)", xs,
                   [bool(v) for v in points["pareto"].to_pylist()],
                   sheets[0] if sheets else None)  # fmt: skip
    out = [first]
    names = points["policy"].to_pylist()
    fits = [bool(v) for v in points["feasible"].to_pylist()]
    ys = retention_of(points)
    for sheet in sheets[1:]:
        costs = [float(tuning.summaries[n]["costs"][sheet]["cost"]) for n in names]
        out.append(Series(f"cost under {sheet} (USD)", costs, pareto(costs, ys, fits), sheet))
    return out


MarkKind = Literal["preset", "tuned"]


@dataclass(frozen=True)
class Mark:
    """A policy marked on the fronts: a preset or the searched (tuned) one,
    with its figures (``prompt_tokens``, ``retention``, ``over_window``,
    ``cost`` and ``costs``: the cost per price sheet)."""

    label: str
    kind: MarkKind
    figures: Mapping[str, Any]

    def x(self, sheet: str | None) -> float:
        """Its prompt tokens (``sheet`` None), else its cost under ``sheet``
        (a sheet it was not priced under: its first cost)."""
        if sheet is None:
            return float(self.figures["prompt_tokens"])
        return float(self.figures["costs"].get(sheet, self.figures["cost"]))


def marks_of(tuning: Tuning, kind: MarkKind = "preset",
             labels: Mapping[str, str] | None = None) -> list[Mark]:  # fmt: skip
    """A mark per point of ``tuning`` (a replay of the presets, or of a
    searched policy), labelled by ``labels`` (default: the point's name)."""
    ys = retention_of(tuning.points)
    out = []
    for r, y in zip(tuning.points.to_pylist(), ys, strict=True):
        costs = tuning.summaries[r["policy"]].get("costs") or {}
        figures = {"prompt_tokens": r["prompt_tokens"], "retention": y,
                   "over_window": r["over_window"], "cost": r["cost"],
                   "costs": {m: c["cost"] for m, c in costs.items()}}  # fmt: skip
        out.append(Mark((labels or {}).get(r["policy"], r["policy"]), kind, figures))
    return out


def preset_grid(grid: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """Every preset (``policy.PRESETS``) at each window and ``mask_first`` a
    grid lists: what the report marks beside the grid's points."""
    return {
        "preset": list(PRESETS),
        **{k: list(v) for k, v in grid.items() if k in (*WINDOW_KEYS, *CONFIG_KEYS)},
    }


def grid_marks(corpus: Any, grid: Mapping[str, Any] | str | os.PathLike[str],
               **options: Any) -> list[Mark]:  # fmt: skip
    """Every preset replayed over ``corpus`` at each window a grid lists
    (``preset_grid``; ``options``: ``tune``'s, as the grid's were), as marks
    labelled by their point's name without ``preset=``."""
    from ctxcompact.tuning.grid import load_grid, tune

    presets = tune(corpus, preset_grid(load_grid(grid)), **options)
    names = presets.points["policy"].to_pylist()
    return marks_of(presets, "preset", {n: n.removeprefix("preset=") for n in names})


#: The name (and mark label) of the searched policy in ``search_tuning``.
TUNED = "tuned"


def search_tuning(result: Any, corpus: Any, *, limits: Any, config: Any = None,
                  **options: Any) -> tuple[Tuning, list[Mark]]:  # fmt: skip
    """A ``tune.search`` result's held-out split replayed under every preset
    and the tuned policy (``result.policy``), and each marked: what the
    report of a search draws (``limits``, ``config``, ``options``: the
    search's, ``model``, ``prices``, ``cache``, as ``tune`` takes them)."""
    from ctxcompact.tuning.grid import policy_point, tune
    from ctxcompact.tuning.replay import _sessions

    held = set(result.held_out_ids)
    sessions = [s for s in _sessions(corpus) if s.id in held]
    pts = [policy_point(f"preset={n}", p, limits=limits, config=config)
           for n, p in PRESETS.items()]  # fmt: skip
    pts.append(policy_point(TUNED, result.policy, limits=limits, config=config))
    tuning = tune(sessions, pts, config=config, recorded=True,
                  as_sent=getattr(result, "baseline", None), **options)  # fmt: skip
    labels = {p.name: p.name.removeprefix("preset=") for p in pts}
    marks = [m if m.label != TUNED else Mark(TUNED, "tuned", m.figures)
             for m in marks_of(tuning, "preset", labels)]  # fmt: skip
    return tuning, marks


#: Marks are hollow (a grid point under one shows through) and apart in shape.
_MARK_STYLE = {"preset": {"marker": "D", "color": "#0f766e", "s": 70},
               "tuned": {"marker": "*", "color": "#7c3aed", "s": 260}}  # fmt: skip


def front_plot(points: pa.Table, axis: str | None = None, *, line: Series | None = None,
               marks: Sequence[Mark] = ()) -> str:  # fmt: skip
    """Cost (or prompt tokens: ``axis``, default the cost when every point
    has one; ``line``: another price sheet's) against retention, the front
    highlighted; points whose prompts went over the window are crosses, off
    the front; ``marks`` (presets, the tuned policy) drawn apart, labelled."""
    plt = pyplot()
    if line is None:
        label, xs = _cost_axis(points, axis)
        front = [bool(v) for v in points["pareto"].to_pylist()]
    else:
        label, xs, front = line.label, line.xs, line.front
    ys = retention_of(points)
    fits = points["feasible"].to_pylist()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    dominated = [i for i in range(len(xs)) if fits[i] and not front[i]]
    over = [i for i in range(len(xs)) if not fits[i]]
    if dominated:
        ax.scatter([xs[i] for i in dominated], [ys[i] for i in dominated], color="#9aa5b1",
                   label="dominated")  # fmt: skip
    if over:
        ax.scatter([xs[i] for i in over], [ys[i] for i in over], color="#b91c1c", marker="x",
                   label="over the window (refused prompts): not on the front")  # fmt: skip
    on = sorted((x, y) for x, y, f in zip(xs, ys, front, strict=True) if f)
    ax.plot([x for x, _ in on], [y for _, y in on], "o-", color="#c2410c", label="front")
    # Points at the same place share one label: "name (+k same)".
    at: dict[tuple[float, float], list[str]] = {}
    for i, name in enumerate(points["policy"].to_pylist()):
        if front[i]:
            at.setdefault((xs[i], ys[i]), []).append(name)
    for (x, y), names in at.items():
        text = names[0] + (f" (+{len(names) - 1} same)" if len(names) > 1 else "")
        ax.annotate(text, (x, y), fontsize=7, xytext=(4, -10), textcoords="offset points")
    sheet = line.sheet if line is not None else None if label == "prompt tokens" else ""
    for kind, legend in (("preset", "preset"), ("tuned", "tuned policy (search)")):
        mine = [m for m in marks if m.kind == kind]
        if not mine:
            continue
        mx = [m.x(sheet) for m in mine]
        my = [float(m.figures["retention"]) for m in mine]
        style = _MARK_STYLE[kind]
        ax.scatter(mx, my, marker=style["marker"], s=style["s"], facecolors="none",
                   edgecolors=style["color"], linewidths=1.6, zorder=3, label=legend)  # fmt: skip
        # Marks at the same place share one label, as the front's points do.
        together: dict[tuple[float, float], list[Mark]] = {}
        for m, x, y in zip(mine, mx, my, strict=True):
            together.setdefault((x, y), []).append(m)
        for j, ((x, y), same) in enumerate(sorted(together.items(), key=lambda t: t[0])):
            text = same[0].label + (" (over the window)" if same[0].figures["over_window"] else "")
            text += f" (+{len(same) - 1} same)" if len(same) > 1 else ""
            # staggered: neighbours' labels do not print over each other
            ax.annotate(text, (x, y), fontsize=7, xytext=(5, 5 + 10 * (j % 3)),
                        textcoords="offset points", color=style["color"],
                        weight="bold")  # fmt: skip
    ax.set_xlabel(label)
    ax.set_ylabel("retention (facts stated so far still shown)")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _svg(fig)


def _pick_sessions(calls: pa.Table) -> list[tuple[str, str]]:
    """(title, session id) of a typical session (median baseline prompt) and the
    worst (largest baseline prompt), over the first point's calls."""
    first = calls["policy"][0]
    mine = calls.filter(pc.equal(calls["policy"], first))
    totals = mine.group_by("session_id").aggregate([("baseline_prompt_tokens", "sum")])
    ranked = totals.sort_by([("baseline_prompt_tokens_sum", "ascending")])
    ids = ranked["session_id"].to_pylist()
    picked = [("typical session", ids[len(ids) // 2]), ("worst session", ids[-1])]
    return picked if ids[len(ids) // 2] != ids[-1] else picked[1:]


def steps_plot(calls: pa.Table, session_id: str, policies: Sequence[str], title: str) -> str:
    """Prompt tokens per call of one session: the run as stored, and each policy."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    baseline_drawn = False
    for name in policies:
        mine = calls.filter(
            pc.and_(pc.equal(calls["session_id"], session_id), pc.equal(calls["policy"], name))
        ).sort_by("call")
        steps = mine["call"].to_pylist()
        if not baseline_drawn:
            ax.plot(steps, mine["baseline_prompt_tokens"].to_pylist(), color="#111827",
                    linestyle="--", label="without compaction")  # fmt: skip
            baseline_drawn = True
        ax.plot(steps, mine["prompt_tokens"].to_pylist(), label=name)
        fired = [s for s, c in zip(steps, mine["compacted"].to_pylist(), strict=True) if c]
        prompts = dict(zip(steps, mine["prompt_tokens"].to_pylist(), strict=True))
        ax.scatter(fired, [prompts[s] for s in fired], marker="v", s=28)
    ax.set_title(f"{title}: {session_id}", fontsize=10)
    ax.set_xlabel("model call")
    ax.set_ylabel("prompt tokens")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _svg(fig)


def firing_plot(calls: pa.Table, policies: Sequence[str]) -> str:
    """Where compactions fire: a histogram over the position in the run (0 = first
    call, 1 = last), per policy."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    drawn = False
    for name in policies:
        mine = calls.filter(pc.equal(calls["policy"], name))
        counts = dict(zip(*mine.group_by("session_id").aggregate([("call", "max")])
                          .to_pydict().values(), strict=True))  # fmt: skip
        where = [
            c / max(1, counts[s])
            for s, c, fired in zip(
                mine["session_id"].to_pylist(),
                mine["call"].to_pylist(),
                mine["compacted"].to_pylist(),
                strict=True,
            )
            if fired
        ]
        if where:
            ax.hist(where, bins=10, range=(0, 1), alpha=0.5, label=name)
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "no compaction fired at any point", ha="center", va="center")
    else:
        ax.legend(fontsize=7)
    ax.set_xlabel("position in the run (0: first call, 1: last)")
    ax.set_ylabel("compactions")
    ax.set_xlim(0, 1)
    return _svg(fig)


def lost_plot(lost: Sequence[tuple[str, int]]) -> str:
    """The facts lost most often, as horizontal bars."""
    plt = pyplot()
    top = list(lost)[:15]
    fig, ax = plt.subplots(figsize=(7, 0.3 * max(3, len(top)) + 1))
    if top:
        labels = [t if len(t) <= 70 else t[:67] + "..." for t, _ in reversed(top)]
        ax.barh(labels, [n for _, n in reversed(top)], color="#2563eb")
        ax.tick_params(axis="y", labelsize=7)
    else:
        ax.text(0.5, 0.5, "nothing was lost", ha="center", va="center")
        ax.set_yticks([])
    ax.set_xlabel("compactions that lost it")
    return _svg(fig)


def _shown(c: str, v: Any) -> str:
    if v is None:
        return "-"
    if c == "feasible":
        return "yes" if v else "no"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        if c.endswith("_ratio"):
            return f"{v:+.1%}"
        return shown_score(v) if "retention" in c else f"{v:,.4f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _cells(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    return "".join(f"<td>{html.escape(_shown(c, row.get(c)))}</td>" for c in columns)


def _head(columns: Sequence[str], heads: Mapping[str, str] | None = None) -> str:
    return "".join(f"<th>{html.escape((heads or {}).get(c, c.replace('_', ' ')))}</th>"
                   for c in columns)  # fmt: skip


def _table(points: pa.Table, summaries: dict[str, dict[str, Any]] | None = None) -> str:
    """The per-point table, with a cost column per price sheet after the first
    (``summaries``: each point's ``costs``)."""
    every = [m for m in (next(iter((summaries or {}).values()), {}).get("costs") or {})]
    sheets = every[1:]
    columns = ["policy", "sessions", "calls", "prompt_tokens", "baseline_prompt_tokens",
               "cached_tokens", "compactions", "over_window", "retention",
               "compaction_retention", "cost", "baseline_cost",
               *(f"cost {m}" for m in sheets), "feasible", "pareto"]  # fmt: skip
    columns = [c for c in columns if c in points.column_names or c.startswith("cost ")]
    heads = {"feasible": "fits the window", "pareto": "front"}
    if every:  # the first sheet's model names its columns too
        heads |= {"cost": f"cost {every[0]}", "baseline_cost": f"baseline cost {every[0]}"}
    rows = []
    for r in points.to_pylist():
        costs = (summaries or {}).get(r["policy"], {}).get("costs") or {}
        r |= {f"cost {m}": costs[m]["cost"] for m in sheets if m in costs}
        cls = ' class="front"' if r["pareto"] else "" if r["feasible"] else ' class="over"'
        rows.append(f"<tr{cls}>{_cells(r, columns)}</tr>")
    return (f'<table class="points"><thead><tr>{_head(columns, heads)}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")  # fmt: skip


def _marks_table(marks: Sequence[Mark], sheets: Sequence[str]) -> str:
    """The marked policies (presets, the tuned one) with their figures."""
    columns = ["policy", "kind", "prompt_tokens", "retention", "over_window",
               *(f"cost {m}" for m in sheets)]  # fmt: skip
    rows = []
    for m in marks:
        row = {"policy": m.label, "kind": "tuned (search)" if m.kind == "tuned" else "preset",
               **{k: m.figures[k] for k in ("prompt_tokens", "retention", "over_window")},
               **{f"cost {s}": m.figures["costs"].get(s) for s in sheets}}  # fmt: skip
        rows.append(f'<tr class="{m.kind}">{_cells(row, columns)}</tr>')
    return (f'<table class="marks"><thead><tr>{_head(columns)}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")  # fmt: skip


#: Shown per session in the recorded-vs-replayed table: (recorded, replayed).
RECORDED_PAIRS = (("recorded_calls", "calls"),
                  ("recorded_prompt_tokens", "baseline_prompt_tokens"),
                  ("recorded_cached_tokens", "baseline_cached_tokens"),
                  ("recorded_written_tokens", "baseline_written_tokens"))  # fmt: skip

#: Sessions shown in the recorded-vs-replayed table (those of the largest gap).
RECORDED_SHOWN = 50


def recorded_vs_replayed(tuning: Tuning) -> dict[str, Any]:
    """The usage the runs recorded beside the replay's baseline (the run
    without compaction, which every point shares): ``sessions`` (per session,
    ``tuning.replay.per_session_table`` of the first point with the recorded
    usage and ``gap_ratio``: the gap over the recorded prompt tokens), the
    ``totals`` over the sessions that recorded usage
    (``tuning.recorded.recorded_totals`` and the baseline's beside them)."""
    calls = tuning.calls
    first = calls.filter(pc.equal(calls["policy"], calls["policy"][0]))
    per = per_session_table(first, tuning.recorded or []).to_pylist()
    for r in per:
        sent = r["recorded_prompt_tokens"]
        r["gap_ratio"] = r["prompt_gap"] / sent if sent else None
    baseline = {r["session_id"]: r["baseline_prompt_tokens"] for r in per}
    totals = recorded_totals([r for r in per if r["recorded_prompt_tokens"] is not None],
                             baseline)  # fmt: skip
    recorded = [r for r in per if r["recorded_prompt_tokens"] is not None]
    for _, replayed in RECORDED_PAIRS:
        totals[replayed] = sum(r[replayed] for r in recorded) if recorded else None
    totals["sessions"] = len(per)
    return {"sessions": per, "totals": totals}


def _recorded_section(tuning: Tuning) -> str:
    """Recorded vs replayed: the corpus's total, then a row per session."""
    head = '<section id="recorded"><h2>Recorded vs replayed</h2>'
    if tuning.recorded is None:
        return (f'{head}<p class="no-recorded">no recorded usage: the runs\' own usage was '
                "not read (tune(..., recorded=True) reads it)</p></section>")  # fmt: skip
    data = recorded_vs_replayed(tuning)
    t = data["totals"]
    if not t["recorded_sessions"]:
        return (f'{head}<p class="no-recorded">no recorded usage: none of the '
                f"{t['sessions']:,} sessions records what it sent (the replay's baseline "
                "stands alone)</p></section>")  # fmt: skip
    intro = (f"<p>{t['recorded_sessions']:,} of {t['sessions']:,} sessions record the usage "
             "they were billed for. Beside it, the replay's baseline (the run without "
             "compaction, re-estimated); the gap is the baseline's prompt tokens less the "
             "recorded ones, over the recorded. A null (-) is a figure the run does not "
             "record (SWE-agent records no cache reads or writes).</p>")  # fmt: skip
    columns = ["session_id"]
    heads = {"session_id": "session", "gap_ratio": "prompt gap %"}
    for rec, rep in RECORDED_PAIRS:
        columns += [rec, rep]
        heads |= {rec: rec.replace("_", " "), rep: f"replayed {rep.replace('_', ' ')}"}
    columns.append("gap_ratio")
    total = {**t, "session_id": "all recording sessions", "gap_ratio": t["prompt_gap_ratio"]}
    rows = [f'<tr class="total">{_cells(total, columns)}</tr>']
    per = sorted((r for r in data["sessions"] if r["recorded_prompt_tokens"] is not None),
                 key=lambda r: -abs(r["gap_ratio"] or 0))  # fmt: skip
    rows += [f"<tr>{_cells(r, columns)}</tr>" for r in per[:RECORDED_SHOWN]]
    more = ""
    if len(per) > RECORDED_SHOWN:
        more = (f"<p>The {RECORDED_SHOWN} sessions of the largest gap are shown, of "
                f"{len(per):,} that record usage.</p>")  # fmt: skip
    return (
        f'{head}{intro}<table class="recorded"><thead><tr>{_head(columns, heads)}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>{more}</section>"
    )


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; color: #111827; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 1rem 0; }
th, td { border: 1px solid #d1d5db; padding: 0.25rem 0.5rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.front { background: #fff7ed; font-weight: 600; }
tr.over { color: #b91c1c; }
tr.total { font-weight: 600; background: #f3f4f6; }
tr.tuned { background: #f5f3ff; font-weight: 600; }
figure { margin: 1.5rem 0; }
figcaption { font-size: 0.85rem; color: #4b5563; }
.plot svg { max-width: 100%; height: auto; }
"""


def _distinct(points: pa.Table, n: int = 4) -> list[str]:
    """Up to ``n`` points that differ in what they send: the front first, then
    the rest by fewest prompt tokens, points over the window last (points with
    the same totals are one)."""
    rows = sorted(
        points.to_pylist(), key=lambda r: (not r["pareto"], not r["feasible"], r["prompt_tokens"])
    )
    seen: set[tuple[Any, ...]] = set()
    out: list[str] = []
    for r in rows:
        key = (r["prompt_tokens"], r["cached_tokens"], r["compactions"])
        if key not in seen:
            seen.add(key)
            out.append(r["policy"])
    return out[:n]


def front_caption(tuning: Tuning) -> str:
    """What the front weighs, and which points it leaves out."""
    over = tuning.points.num_rows - sum(tuning.points["feasible"].to_pylist())
    if tuning.axis == "cost":
        text = ("Cost against retention over the grid; the front is the points no other "
                "point beats on both.")  # fmt: skip
    else:
        text = ("Prompt tokens against retention over the grid (no model was named, so the "
                "calls are not priced: the front is on prompt tokens, not cost); the front "
                "is the points no other point beats on both.")  # fmt: skip
    if over:
        text += (f" {over} point(s) sent prompts over the input window (crosses, "
                 "marked in the table): the model would refuse them, so "
                 "they are never on the front.")  # fmt: skip
    return text


def _priced_by(tuning: Tuning) -> str:
    """Which row of the price table priced the costs (name, source, date)."""
    if tuning.price_row is None:
        return ""
    from ctxcompact.tuning.prices import describe_row

    text = describe_row(tuning.price_row.as_dict())
    costs = next(iter(tuning.summaries.values()), {}).get("costs") or {}
    more = "".join(
        f'<p class="priced">{html.escape(m)}: priced by the price table\'s '
        f"{html.escape(describe_row(c['price_row']))}.</p>"
        for m, c in list(costs.items())[1:]
    )
    return f'<p class="priced">Costs priced by the price table\'s {html.escape(text)}.</p>{more}'


def _counted(tuning: Tuning) -> str:
    """Which count the figures use, and the baseline each run was replayed
    against (the stored history sent whole, or as sent: ``tune(...,
    as_sent=...)``), with the choice per run."""
    text = ""
    if tuning.count:
        text += (f'<p class="count">Prompt tokens counted as: {html.escape(tuning.count)} '
                 "(exact in the priced model's tokenizer family where it is known, else "
                 "the estimate).</p>")  # fmt: skip
    if tuning.as_sent is None:
        return text + ('<p class="as-sent">Baseline: each run\'s stored history sent '
                       "whole.</p>")  # fmt: skip
    picked = Counter(str(c["as_sent"]) for c in tuning.as_sent)
    said = ", ".join(f"{html.escape(k)} ({n:,})" for k, n in picked.most_common())
    rows = "".join(
        f"<tr><td>{html.escape(str(c['session_id']))}</td><td>{html.escape(str(c['as_sent']))}"
        f"</td><td>{html.escape(str(c['as_sent_reason']))}</td>"
        f"<td>{_shown('as_sent_prompt_tokens', c['as_sent_prompt_tokens'])}</td>"
        f"<td>{_shown('recorded_prompt_tokens', c['recorded_prompt_tokens'])}</td></tr>"
        for c in tuning.as_sent[:RECORDED_SHOWN]
    )
    more = (f"<p>The first {RECORDED_SHOWN} of {len(tuning.as_sent):,} runs are listed.</p>"
            if len(tuning.as_sent) > RECORDED_SHOWN else "")  # fmt: skip
    return (f'{text}<section id="as-sent"><p class="as-sent">Baseline: each run replayed as it '
            f"was sent, under the policy chosen per run: {said}.</p>"
            '<table class="as-sent"><thead><tr><th>session</th><th>as sent</th><th>why</th>'
            "<th>prompt tokens</th><th>recorded</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{more}</section>")  # fmt: skip


def _front_caption(tuning: Tuning, s: Series, first: bool, marks: Sequence[Mark]) -> str:
    text = front_caption(tuning) if first else (
        f"Cost under {s.sheet} against retention over the grid; the front under this "
        "price sheet: the points no other point beats on both.")  # fmt: skip
    kinds = {m.kind for m in marks}
    if kinds:
        which = " and ".join(
            w
            for k, w in (("preset", "the presets (diamonds)"), ("tuned", "the tuned policy (star)"))
            if k in kinds
        )
        text += f" Marked apart from the grid's points: {which}."  # fmt: skip
    return text


def render_report(tuning: Tuning, *, title: str = "ctxcompact policy grid",
                  marks: Sequence[Mark] = ()) -> str:  # fmt: skip
    """The report as one HTML string. ``marks``: policies drawn apart on
    each front and listed under it (``marks_of`` a replay of the presets,
    ``preset_grid``, or of a searched policy)."""
    points, calls = tuning.points, tuning.calls
    shown = _distinct(points)
    lost: Counter[str] = Counter()
    for s in tuning.summaries.values():
        lost.update(dict(s.get("most_lost", [])))
    figures = []
    lines = series(tuning)
    for i, line in enumerate(lines):
        key = "front" if i == 0 else f"front-{i}"
        figures.append((key, _front_caption(tuning, line, i == 0, marks),
                        front_plot(points, tuning.axis, line=line, marks=marks)))  # fmt: skip
    for caption, sid in _pick_sessions(calls):
        figures.append((
            f"steps-{len(figures)}",
            f"Prompt tokens per model call of the {caption}, as stored (dashed) and under "
            "the front's policies and the leanest others (one of each set of equal "
            "results); triangles mark compactions.",
            steps_plot(calls, sid, shown, caption),
        ))  # fmt: skip
    figures.append(("firing", "Where in the runs compactions fire.", firing_plot(calls, shown)))
    figures.append(("lost", "Facts lost most often, over every point of the grid.",
                    lost_plot(ranked(lost, None))))  # fmt: skip
    fronts = len(lines)
    body = "".join(
        f'<figure class="plot" id="{key}">{svg}<figcaption>{html.escape(caption)}</figcaption>'
        "</figure>"
        for key, caption, svg in figures[:fronts]
    )
    marked = _marks_table(marks, sheets_of(tuning)) if marks else ""
    rest = "".join(
        f'<figure class="plot" id="{key}">{svg}<figcaption>{html.escape(caption)}</figcaption>'
        "</figure>"
        for key, caption, svg in figures[fronts:]
    )
    sessions = len(pc.unique(calls["session_id"]))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>{points.num_rows} policies replayed over {sessions:,} sessions "
        f"({calls.num_rows:,} model calls in all). Replay fixes the runs' own actions: it "
        "shows what each call would have been sent, not what the agent would then have "
        f"done.</p>{_priced_by(tuning)}{_counted(tuning)}"
        f"{_table(points, tuning.summaries)}{body}{marked}{_recorded_section(tuning)}{rest}"
        "</body></html>"
    )


def write_report(tuning: Tuning, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """Write the report to ``path`` (atomically: a failed write leaves nothing)."""
    out = Path(path)
    text = render_report(tuning, **kwargs)
    with replacing(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return out


__all__ = [
    "Mark",
    "Series",
    "front_caption",
    "marks_of",
    "preset_grid",
    "pyplot",
    "recorded_vs_replayed",
    "render_report",
    "retention_of",
    "series",
    "write_report",
]
