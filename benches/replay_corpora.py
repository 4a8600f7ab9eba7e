"""Replay every corpus of ../shared/data under each preset (issue 13, part 7).

    python benches/replay_corpora.py [--context 32000] [--output-limit 4000]
        [--model claude-sonnet-4] [--report docs/tune-report.html]
        [--screenshot docs/tune-report.png]

Prints a Markdown table: per corpus and policy, the prompt tokens summed over
every model call against the runs as stored, the share read from the prompt
cache, the cost with and without the policy, compactions and retention. The
runs are replayed offline (digest summaries). With ``--report`` the swe-agent
grid's HTML report is written, and with ``--screenshot`` a headless Chromium
(selenium + chromedriver) photographs it.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import ctxcompact as cc
from ctxcompact.tuning import tune
from ctxcompact.tuning.report import grid_marks, write_report

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CORPORA = {
    "swe-agent": DATA / "transcripts" / "swe-agent",
    "mini-swe-agent": DATA / "transcripts" / "mini-swe-agent",
    "openhands": DATA / "transcripts" / "openhands",
    "tau-bench": DATA / "transcripts" / "tau-bench",
    "claude-code": DATA / "formats" / "claude-code",
}
GRID = {"preset": ["opencode", "swe-agent", "anthropic-clear-tool-uses", "aggressive"],
        "mask_first": [False, True]}  # fmt: skip


def screenshot(page: Path, out: Path) -> None:
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--window-size=1280,2300"):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.get(page.resolve().as_uri())
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", type=int, default=32_000)
    ap.add_argument("--output-limit", type=int, default=4_000)
    ap.add_argument("--model", default="claude-sonnet-4")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--report", type=Path)
    ap.add_argument("--screenshot", type=Path)
    args = ap.parse_args()
    limits = {"context": args.context, "output": args.output_limit}
    print(f"context {args.context:,}, output limit {args.output_limit:,}, prices of "
          f"{args.model}\n")  # fmt: skip
    print("| corpus | policy | sessions | calls | prompt tokens | vs stored | cache reads "
          "| cost | vs stored | compactions | retention |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for corpus, path in CORPORA.items():
        # the claude-code samples include deliberately broken lines: skipped, and counted
        read = cc.read_sessions(path, on_error="skip")
        transcript = read.transcript
        result = tune(transcript, GRID, limits=limits, model=args.model, workers=args.workers)
        for r in result.points.to_pylist():
            name = r["policy"].replace("preset=", "").replace(",mask_first=False", "")
            name = name.replace(",mask_first=True", " + mask_first")
            saved = 1 - r["prompt_tokens"] / r["baseline_prompt_tokens"]
            cost = r["cost"] / r["baseline_cost"] - 1
            print(f"| {corpus} | {name} | {r['sessions']} | {r['calls']:,} | "
                  f"{r['prompt_tokens']:,} | {-saved:+.1%} | "
                  f"{r['cached_tokens'] / r['prompt_tokens']:.0%} | ${r['cost']:.2f} | "
                  f"{cost:+.1%} | {r['compactions']} | {r['retention']:.2f} |")  # fmt: skip
        if corpus == "swe-agent" and args.report is not None:
            grid = {**GRID, "context": [16_000, args.context, 64_000]}
            window = {"context": 0, "output": args.output_limit}
            swept = tune(transcript, grid, limits=window, model=args.model, workers=args.workers,
                         recorded=True)  # fmt: skip
            marks = grid_marks(transcript, grid, limits=window, model=args.model,
                               workers=args.workers)  # fmt: skip
            title = "ctxcompact: SWE-agent runs under 24 policies"
            page = write_report(swept, args.report, title=title, marks=marks)
            if args.screenshot is not None:
                screenshot(page, args.screenshot)


if __name__ == "__main__":
    main()
