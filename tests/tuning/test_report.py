"""The grid's HTML report: self-contained, and rendered by a real headless Chromium.

.ci/run installs Debian's ``chromium`` and ``chromium-driver`` where missing;
the screenshot is kept in ``CTXCOMPACT_ARTIFACTS`` (default: the test's tmp dir).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ctxcompact as cc
import pytest
from ctxcompact.tuning import tune
from ctxcompact.tuning.grid import points, results
from ctxcompact.tuning.report import render_report, write_report
from test_grid import LIMITS, SESSIONS, handmade

pytest.importorskip("matplotlib", reason="the report extra is not installed")


@pytest.fixture(scope="module")
def tuning() -> Any:
    grid = {"preset": ["opencode", "swe-agent", "aggressive"], "mask_first": [False, True],
            "context": [12_000, 40_000]}  # fmt: skip
    return tune(SESSIONS, grid, limits=LIMITS, model="claude-sonnet-4", workers=1)


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


def test_the_report_renders_in_chromium(tuning: Any, tmp_path: Path, browser: Any) -> None:
    page = write_report(tuning, tmp_path / "report.html")
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
    assert [p["id"] for p in plots] == ["front", "steps-1", "steps-2", "firing", "lost"]
    for p in plots:
        assert p["w"] > 300 and p["h"] > 100, p
        assert p["marks"] > 10 and p["text"] > 20, p
    rows = browser.execute_script("return document.querySelectorAll('tbody tr').length")
    assert rows == tuning.points.num_rows
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
