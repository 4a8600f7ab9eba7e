"""The grid's HTML report: self-contained, and rendered by a real headless Chromium.

.ci/run installs Debian's ``chromium`` and ``chromium-driver`` where missing;
the screenshot is kept in ``CTXCOMPACT_ARTIFACTS`` (default: the test's tmp dir).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pyarrow.compute as pc
import pytest
from builders import read_run
from cli_run import invoke
from ctxcompact.policy import PRESETS
from ctxcompact.tuning import search, tune
from ctxcompact.tuning.grid import points, results
from ctxcompact.tuning.report import (
    TUNED,
    grid_marks,
    render_report,
    search_tuning,
    series,
    write_report,
)
from test_grid import LIMITS, SESSIONS, handmade

pytest.importorskip("matplotlib", reason="the report extra is not installed")


@pytest.fixture(scope="module")
def tuning() -> Any:
    grid = {"preset": ["opencode", "swe-agent", "aggressive"], "mask_first": [False, True],
            "context": [12_000, 40_000]}  # fmt: skip
    return tune(SESSIONS, grid, limits=LIMITS, model="claude-sonnet-4", workers=1,
                recorded=True)  # fmt: skip


GRID = {"preset": ["opencode", "swe-agent", "aggressive"], "mask_first": [True],
        "context": [12_000, 40_000]}  # fmt: skip
SHEETS = ["claude-sonnet-4", "gpt-4o"]


def billed(sid: str, steps: int, chars: int, usage: dict[str, Any] | None) -> cc.Session:
    """A read run whose every model call records ``usage`` (None: records nothing)."""
    data = read_run(sid, steps, chars).model_dump(mode="json")
    for m in data["messages"]:
        if m["info"]["role"] == "assistant" and usage is not None:
            m["info"]["tokens"] = usage
    return cc.Session.model_validate(data)


#: Two runs that record their usage (different amounts), one that records none.
USAGE = {"r1": {"input": 900, "output": 20, "cache": {"read": 2_000, "write": 300}},
         "r2": {"input": 4_000, "output": 10, "cache": {"read": 0, "write": 1_000}},
         "r3": None}  # fmt: skip
BILLED = [billed(sid, 6 + 2 * i, 3_000 + 400 * i, u) for i, (sid, u) in enumerate(USAGE.items())]


@pytest.fixture(scope="module")
def full() -> Any:
    """A grid priced under two sheets over runs that record usage, the presets marked."""
    options = {"limits": LIMITS, "model": SHEETS, "workers": 1}
    return tune(BILLED, GRID, recorded=True, **options), grid_marks(BILLED, GRID, **options)


def _section(page: str, start: str, end: str = "</section>") -> str:
    return page.split(start, 1)[1].split(end, 1)[0]


def _rows(table: str) -> list[list[str]]:
    body = table.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [re.findall(r"<td>(.*?)</td>", tr) for tr in body.split("</tr>") if "<td>" in tr]


def test_recorded_usage_beside_the_baseline(full: Any) -> None:
    tuning, _ = full
    page = render_report(tuning)
    section = _section(page, '<section id="recorded">')
    assert "2 of 3 sessions record the usage" in section
    first = tuning.calls.filter(pc.equal(tuning.calls["policy"], tuning.calls["policy"][0]))
    rows = {r[0]: r for r in _rows(section)}
    want_total = dict.fromkeys(("calls", "rec_calls", "prompt", "rec_prompt", "cached",
                                "rec_cached", "written", "rec_written"), 0)  # fmt: skip
    for session in BILLED:
        usage = USAGE[session.id]
        if usage is None:  # a run that records nothing has no row
            assert session.id not in rows
            continue
        mine = first.filter(pc.equal(first["session_id"], session.id))
        calls = mine.num_rows
        prompt = pc.sum(mine["baseline_prompt_tokens"]).as_py()
        cached = pc.sum(mine["baseline_cached_tokens"]).as_py()
        rec_prompt = calls * (usage["input"] + usage["cache"]["read"] + usage["cache"]["write"])
        got = dict(zip(("calls", "rec_calls", "prompt", "rec_prompt", "cached", "rec_cached",
                        "written", "rec_written"),
                       (calls, calls, prompt, rec_prompt, cached,
                        calls * usage["cache"]["read"], prompt - cached,
                        calls * usage["cache"]["write"]), strict=True))  # fmt: skip
        for k, v in got.items():
            want_total[k] += v
        assert rows[session.id][1:] == [
            f"{got['rec_calls']:,}", f"{got['calls']:,}", f"{got['rec_prompt']:,}",
            f"{got['prompt']:,}", f"{got['rec_cached']:,}", f"{got['cached']:,}",
            f"{got['rec_written']:,}", f"{got['written']:,}",
            f"{(got['prompt'] - got['rec_prompt']) / got['rec_prompt']:+.1%}",
        ]  # fmt: skip
    t = want_total
    assert rows["all recording sessions"][1:] == [
        f"{t['rec_calls']:,}", f"{t['calls']:,}", f"{t['rec_prompt']:,}", f"{t['prompt']:,}",
        f"{t['rec_cached']:,}", f"{t['cached']:,}", f"{t['rec_written']:,}",
        f"{t['written']:,}", f"{(t['prompt'] - t['rec_prompt']) / t['rec_prompt']:+.1%}",
    ]  # fmt: skip


def test_runs_that_record_nothing_say_so(tuning: Any) -> None:
    section = _section(render_report(tuning), '<section id="recorded">')
    assert f"no recorded usage: none of the {len(SESSIONS)} sessions records" in section
    assert "<table" not in section
    # not read (a tune without recorded=True): said so, not "none recorded"
    unread = tune(BILLED, {"preset": ["opencode"]}, limits={"context": 40_000, "output": 1_000})
    assert unread.recorded is None
    section = _section(render_report(unread), '<section id="recorded">')
    assert "no recorded usage: the runs' own usage was not read" in section


def test_a_cost_column_and_a_front_per_price_sheet(full: Any) -> None:
    tuning, _ = full
    page = render_report(tuning)
    table = page.split('<table class="points">', 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert "cost claude-sonnet-4" in heads and "cost gpt-4o" in heads
    for row in _rows(table):
        costs = tuning.summaries[row[0]]["costs"]
        for sheet in SHEETS:
            assert row[heads.index(f"cost {sheet}")] == f"{costs[sheet]['cost']:,.4f}"
    ids = re.findall(r'<figure class="plot" id="([^"]+)"', page)
    assert ids[:2] == ["front", "front-1"]
    assert "Cost under gpt-4o against retention" in _section(page, 'id="front-1"', "</figure>")
    # each sheet's front: nothing on it is beaten on both its cost and retention,
    # and every feasible point off it is
    ys = tuning.points["retention"].to_pylist()
    fits = tuning.points["feasible"].to_pylist()
    for line in series(tuning):
        assert line.sheet in SHEETS
        on = [i for i, f in enumerate(line.front) if f]
        assert on

        def beats(o: int, i: int, line: Any = line) -> bool:
            return (line.xs[o] <= line.xs[i] and ys[o] >= ys[i]
                    and (line.xs[o] < line.xs[i] or ys[o] > ys[i]))  # fmt: skip

        for i in range(len(ys)):
            beaten = any(beats(o, i) for o in range(len(ys)) if fits[o])
            assert line.front[i] == (fits[i] and not beaten), (line.sheet, i)


def test_every_preset_is_marked_beside_the_grid(full: Any) -> None:
    tuning, marks = full
    page = render_report(tuning, marks=marks)
    table = page.split('<table class="marks">', 1)[1].split("</table>", 1)[0]
    rows = {r[0]: r for r in _rows(table)}
    for preset in PRESETS:
        for context in GRID["context"]:
            label = f"{preset},mask_first=True,context={context}"
            assert rows[label][1] == "preset"
            # a grid point of the same preset and window replays the same
            if f"preset={label}" in tuning.summaries:
                same = tuning.summaries[f"preset={label}"]
                assert rows[label][2] == f"{same['prompt_tokens']:,}"
                assert rows[label][3] == f"{same['retention']:.3f}"
    # each is labelled on every front plot (marks at one place: "label (+k same)")
    labels = {m.label for m in marks}
    for key in ("front", "front-1"):
        svg = _section(page, f'id="{key}"', "</figure>")
        assert "<!-- preset -->" in svg  # the legend
        named = [
            (m[0], int(m[1] or 0))
            for m in re.findall(r"<!-- (.+?)(?: \(\+(\d+) same\))? -->", svg)
            if m[0] in labels
        ]
        assert sum(1 + k for _, k in named) == len(marks) == len(PRESETS) * 2, named


def test_the_tuned_policy_is_marked_with_its_held_out_figures() -> None:
    options = {"limits": {"context": 40_000, "output": 1_000}, "model": "claude-sonnet-4"}
    config = cc.CompactionConfig(mask_first=True)
    result = search(BILLED + SESSIONS, budget=6, config=config, **options)
    held, marks = search_tuning(result, BILLED + SESSIONS, config=config, **options)
    assert sorted(held.points["policy"].to_pylist()) == sorted(
        [f"preset={p}" for p in PRESETS] + [TUNED])  # fmt: skip
    page = render_report(held, marks=marks)
    table = page.split('<table class="marks">', 1)[1].split("</table>", 1)[0]
    assert '<tr class="tuned">' in table and table.count('<tr class="preset">') == len(PRESETS)
    rows = {r[0]: r for r in _rows(table)}
    # the report's figures are the search's on the held-out split
    assert rows[TUNED][1:5] == ["tuned (search)", f"{result.held_out['prompt_tokens']:,}",
                                f"{result.held_out['retention']:.3f}",
                                f"{result.held_out['over_window']:,}"]  # fmt: skip
    for name, figures in result.presets.items():
        assert rows[name][2] == f"{figures['prompt_tokens']:,}"
    front = _section(page, 'id="front"', "</figure>")
    assert "<!-- tuned policy (search) -->" in front and f"<!-- {TUNED} -->" in front
    ids = set(result.held_out_ids)
    assert set(pc.unique(held.calls["session_id"]).to_pylist()) == ids


def test_tune_report_from_the_command(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    from ctxcompact import formats

    runs, grid, report = tmp_path / "runs.jsonl", tmp_path / "grid.toml", tmp_path / "r.html"
    formats.write(BILLED, runs, "opencode")
    grid.write_text('preset = ["swe-agent"]\nmask_first = [true]\ncontext = [12000, 40000]\n')
    code, text, err = invoke(monkeypatch, capsys, "tune", str(runs), "--grid", str(grid),
                             "--output-limit", "1000", "--price", SHEETS[0], "--price",
                             SHEETS[1], "--workers", "1", "--report", str(report),
                             "--json")  # fmt: skip
    assert code == 0, err
    shown = json.loads(text)
    page = report.read_text()
    ids = re.findall(r'<figure class="plot" id="([^"]+)"', page)
    assert ids[:2] == ["front", "front-1"]
    marks = _rows(page.split('<table class="marks">', 1)[1].split("</table>", 1)[0])
    assert sorted(r[0] for r in marks) == sorted(
        f"{p},mask_first=True,context={c}" for p in PRESETS for c in (12000, 40000))  # fmt: skip
    # the marked swe-agent is the grid's own swe-agent point
    for policy in shown["policies"]:
        mark = next(r for r in marks if f"preset={r[0]}" == policy["name"])
        assert mark[2] == f"{policy['prompt_tokens']:,}"
        assert mark[5:] == [f"{policy['costs'][m]['cost']:,.4f}" for m in SHEETS]
    assert "2 of 3 sessions record the usage" in _section(page, '<section id="recorded">')


def test_the_page_is_self_contained(tuning: Any) -> None:
    page = render_report(tuning)
    # nothing is fetched: no scripts, stylesheets, images or links to load
    # (the SVGs' xmlns/metadata URIs are names, not fetches)
    for fetch in ("<script", "<link", "<img", "<iframe", " src=", 'href="http', "url(http"):
        assert fetch not in page, fetch
    assert page.count("<svg") == 5  # front, typical and worst session, firing, lost
    # every point is a row of the table, the front marked
    for name in tuning.points["policy"].to_pylist():
        assert f"<td>{name}</td>" in page
    assert page.count('<tr class="front">') == sum(tuning.points["pareto"].to_pylist())


def test_points_over_the_window_are_flagged_never_highlighted() -> None:
    pts = points({"context": [3_000, 16_000, 64_000]}, limits=LIMITS)
    calls = handmade(pts, {"context=3000": (1_000, 10, 8, True),
                           "context=16000": (4_000, 10, 3, False),
                           "context=64000": (5_000, 0, 0, False)})  # fmt: skip
    page = render_report(results(calls, pts, None, None))
    assert '<tr class="over"><td>context=3000</td>' in page
    assert '<tr class="front"><td>context=16000</td>' in page
    assert page.count('<tr class="front">') == 2
    assert "over the window (refused prompts): not on the front" in page  # the plot's legend
    caption = page.split('id="front"')[1].split("<figcaption>")[1].split("</figcaption>")[0]
    assert "no model was named, so the calls are not priced: the front is on prompt tokens" in (
        caption
    )
    assert "1 point(s) sent prompts over the input window" in caption


def test_an_unwritable_report_leaves_nothing(tuning: Any, tmp_path: Path) -> None:
    with pytest.raises(OSError):
        write_report(tuning, tmp_path / "missing" / "r.html")
    assert not list(tmp_path.rglob("*"))


def _chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture
def browser() -> Iterator[Any]:
    found = _chromium()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs chromium and chromium-driver (.ci/run); they are missing")
        pytest.skip("no chromium/chromedriver on this machine (.ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,2400"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=found[1])
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_report_renders_in_chromium(full: Any, tmp_path: Path, browser: Any) -> None:
    tuning, marks = full
    page = write_report(tuning, tmp_path / "report.html", marks=marks)
    browser.get(page.as_uri())
    assert browser.title == "ctxcompact policy grid"
    plots = browser.execute_script(
        """return [...document.querySelectorAll('figure.plot')].map(f => {
             const svg = f.querySelector('svg'); const r = svg.getBoundingClientRect();
             return {id: f.id, w: r.width, h: r.height,
                     marks: svg.querySelectorAll('path, use, rect').length,
                     text: svg.textContent.length};
           })"""
    )
    # a front per price sheet, each drawn
    assert [p["id"] for p in plots] == ["front", "front-1", "steps-2", "steps-3", "firing",
                                        "lost"]  # fmt: skip
    for p in plots:
        assert p["w"] > 300 and p["h"] > 100, p
        assert p["marks"] > 10 and p["text"] > 20, p
    # every SVG parsed as SVG (a broken one renders as text or not at all)
    broken = browser.execute_script(
        """return [...document.querySelectorAll('svg')].filter(s =>
             !(s instanceof SVGSVGElement) || s.getBBox().width === 0).length"""
    )
    assert broken == 0
    counts = browser.execute_script(
        """const n = s => document.querySelectorAll(s).length;
           return {points: n('table.points tbody tr'), marks: n('table.marks tbody tr'),
                   recorded: n('table.recorded tbody tr')}"""
    )
    assert counts == {"points": tuning.points.num_rows, "marks": len(marks),
                      "recorded": 1 + sum(u is not None for u in USAGE.values())}  # fmt: skip
    for shown in ("table.points", "table.marks", "#recorded", "table.recorded"):
        box = browser.execute_script(
            f"const r = document.querySelector('{shown}').getBoundingClientRect();"
            "return [r.width, r.height]"
        )
        assert box[0] > 200 and box[1] > 40, (shown, box)
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    shots = Path(os.environ.get("CTXCOMPACT_ARTIFACTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / "tune-report.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000
    assert re.match(rb"\x89PNG", shot.read_bytes()[:4])


def test_the_report_of_real_runs(tmp_path: Path) -> None:
    swe = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "swe-agent"
    if not swe.is_dir():
        pytest.skip("needs ../shared/data")
    transcript = cc.read_sessions(swe).transcript
    result = tune(transcript, {"preset": ["opencode", "swe-agent"], "mask_first": [True],
                               "context": [16_000, 64_000]},
                  limits={"context": 0, "output": 4_000}, model="gpt-4o", workers=1)  # fmt: skip
    page = render_report(result)
    assert page.count("<svg") == 5 and "preset=swe-agent,mask_first=True" in page
