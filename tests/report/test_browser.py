"""Open report.html in headless Chromium (Debian `chromium`): the DOM a browser builds and a screenshot of it.

Skipped when Chromium is not installed (apt-get install chromium), unless the environment variable CI is set:
then a missing browser fails the test, so CI cannot pass without having looked.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from graphsweep.report.write import write_reports
from graphsweep.report.colours import VERDICT_COLORS
from tests.support import HEIGHT, SWEEP, WIDTH, build_sweep, chromium, run_chromium


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    paths = build_sweep(tmp / "tables")
    out = tmp / "results" / SWEEP
    write_reports(paths["plan"], paths["runs"], paths["iterations"], paths["comparison"], out / "report.md", out / "report.html")
    return out / "report.html"


@pytest.mark.chromium
def test_browser_dom_has_badges_rows_and_plots(report_html: Path, tmp_path: Path) -> None:
    exe = chromium()
    res = run_chromium(exe, tmp_path / "profile", "--dump-dom", report_html.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    counts = re.search(r'<div class="badges" id="verdict-counts">(.*?)</div>', dom, re.S)
    assert counts, "verdict counts missing from the rendered page"
    for text in ("2 speedup", "1 slowdown", "2 inconclusive", "1 blocked", "1 oom", "1 baseline-failed"):
        assert f">{text}</span>" in counts.group(1)
    rows = re.findall(r'<tr id="cell-[^"]+"', dom)
    assert len(rows) == 9  # every cell, the A/A control included
    # The browser parsed the inline SVG plots into elements with drawn paths (not text, not broken images).
    svgs = re.findall(r'<svg class="plot ([a-z-]+)"', dom)
    assert {"memory-bars", "traces"} <= set(svgs)
    assert dom.count("<path") > 50
    assert len(re.findall(r'<td class="hm v-', dom)) == 8  # heatmap: one square per cell of both variants


@pytest.mark.chromium
def test_browser_screenshot_shows_verdict_colours(report_html: Path, tmp_path: Path) -> None:
    exe = chromium()
    shot = tmp_path / "report.png"
    res = run_chromium(exe, tmp_path / "profile", f"--screenshot={shot}", report_html.as_uri())
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    assert img.size == (WIDTH, HEIGHT)
    colours = {c for _, c in img.getcolors(maxcolors=WIDTH * HEIGHT)}
    # Badges and heatmap squares are painted in the verdict colours: the page rendered, styles included.
    for verdict in ("speedup", "slowdown", "inconclusive", "oom", "blocked"):
        rgb = tuple(int(VERDICT_COLORS[verdict][i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in colours, f"no {verdict} colour {VERDICT_COLORS[verdict]} in the screenshot"
    if os.environ.get("GRAPHSWEEP_SCREENSHOT"):  # keep a copy to look at (docs/report-screenshot.png)
        shutil.copy(shot, os.environ["GRAPHSWEEP_SCREENSHOT"])
