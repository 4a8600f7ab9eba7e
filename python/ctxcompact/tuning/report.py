"""One self-contained HTML page of a policy grid (``pip install 'ctxcompact[report]'``).

The page needs no network to open: the plots are SVG drawn by matplotlib and
inlined, the styles are inline, there is no script. It shows the per-point
table, the cost-vs-retention front, prompt tokens per call over the steps of
a typical and the worst session (with and without each policy on the front),
where compactions fire along the runs, and the facts lost most often.
"""

from __future__ import annotations

import html
import io
import os
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ctxcompact._atomic import replacing
from ctxcompact.errors import ConfigError
from ctxcompact.tuning.grid import Tuning
from ctxcompact.tuning.retention import ranked


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


def _cost_axis(points: pa.Table, axis: str | None = None) -> tuple[str, list[float]]:
    costs = points["cost"].to_pylist()
    if axis == "cost" or (axis is None and all(c is not None for c in costs)):
        return "cost (USD)", [float(c) for c in costs]
    return "prompt tokens", [float(t) for t in points["prompt_tokens"].to_pylist()]


def front_plot(points: pa.Table, axis: str | None = None) -> str:
    """Cost (or prompt tokens: ``axis``, default the cost when every point
    has one) against retention, the front highlighted; points whose prompts
    went over the window are crosses, off the front."""
    plt = pyplot()
    label, xs = _cost_axis(points, axis)
    ys = points["retention"].to_pylist()
    front = points["pareto"].to_pylist()
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


def _table(points: pa.Table, summaries: dict[str, dict[str, Any]] | None = None) -> str:
    """The per-point table, with a cost column per price sheet after the first
    (``summaries``: each point's ``costs``)."""
    sheets = [m for m in (next(iter((summaries or {}).values()), {}).get("costs") or {})][1:]
    columns = ["policy", "sessions", "calls", "prompt_tokens", "baseline_prompt_tokens",
               "cached_tokens", "compactions", "over_window", "retention", "compaction_retention",
               "cost", "baseline_cost", *(f"cost {m}" for m in sheets), "feasible",
               "pareto"]  # fmt: skip
    heads = {"feasible": "fits the window", "pareto": "front"}
    head = "".join(f"<th>{html.escape(heads.get(c, c.replace('_', ' ')))}</th>" for c in columns)
    rows = []
    for r in points.to_pylist():
        costs = (summaries or {}).get(r["policy"], {}).get("costs") or {}
        r |= {f"cost {m}": costs[m]["cost"] for m in sheets if m in costs}
        cells = []
        for c in columns:
            v = r.get(c)
            if v is None:
                shown = "-"
            elif c == "feasible":
                shown = "yes" if v else "no"
            elif isinstance(v, bool):
                shown = "yes" if v else ""
            elif isinstance(v, float):
                shown = f"{v:.3f}" if c.endswith("retention") else f"{v:,.4f}"
            elif isinstance(v, int):
                shown = f"{v:,}"
            else:
                shown = str(v)
            cells.append(f"<td>{html.escape(shown)}</td>")
        cls = ' class="front"' if r["pareto"] else "" if r["feasible"] else ' class="over"'
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; color: #111827; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 1rem 0; }
th, td { border: 1px solid #d1d5db; padding: 0.25rem 0.5rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.front { background: #fff7ed; font-weight: 600; }
tr.over { color: #b91c1c; }
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


def render_report(tuning: Tuning, *, title: str = "ctxcompact policy grid") -> str:
    """The report as one HTML string."""
    points, calls = tuning.points, tuning.calls
    shown = _distinct(points)
    lost: Counter[str] = Counter()
    for s in tuning.summaries.values():
        lost.update(dict(s.get("most_lost", [])))
    figures = [("front", front_caption(tuning), front_plot(points, tuning.axis))]
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
    body = "".join(
        f'<figure class="plot" id="{key}">{svg}<figcaption>{html.escape(caption)}</figcaption>'
        "</figure>"
        for key, caption, svg in figures
    )
    sessions = len(pc.unique(calls["session_id"]))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>{points.num_rows} policies replayed over {sessions:,} sessions "
        f"({calls.num_rows:,} model calls in all). Replay fixes the runs' own actions: it "
        "shows what each call would have been sent, not what the agent would then have "
        f"done.</p>{_priced_by(tuning)}"
        f"{_table(points, tuning.summaries)}{body}</body></html>"
    )


def write_report(tuning: Tuning, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """Write the report to ``path`` (atomically: a failed write leaves nothing)."""
    out = Path(path)
    text = render_report(tuning, **kwargs)
    with replacing(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return out


__all__ = ["front_caption", "pyplot", "render_report", "write_report"]
