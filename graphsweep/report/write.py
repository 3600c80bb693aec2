"""Write both reports of a sweep.
"""

from __future__ import annotations

from pathlib import Path

from graphsweep.fileio import write_text
from graphsweep.report.data import cost_accounting, load_tables, summarize
from graphsweep.report.html import render_html
from graphsweep.report.markdown import render_markdown


def write_reports(plan: Path, runs: Path, iterations: Path, comparison: Path, md_out: Path, html_out: Path) -> None:
    """Write report.md and report.html for one sweep from its four tables."""
    t = load_tables(Path(plan), Path(runs), Path(iterations), Path(comparison))
    cost = cost_accounting(t)
    s = summarize(t)
    md_out, html_out = Path(md_out), Path(html_out)
    for out, text in ((md_out, render_markdown(t, cost, s)), (html_out, render_html(t, cost, s, html_out.parent))):
        write_text(out, text)
