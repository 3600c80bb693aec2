"""Write both reports of a sweep: the report model from the four tables, laid out by the two templates.
"""

from __future__ import annotations

from pathlib import Path

from graphsweep.fileio import write_text
from graphsweep.report.data import SweepTables, load_tables
from graphsweep.report.model import build
from graphsweep.report.render import render_html, render_markdown


def write_reports(plan: Path, runs: Path, iterations: Path, comparison: Path, md_out: Path, html_out: Path) -> None:
    """Write report.md and report.html for one sweep from its four tables."""
    t = load_tables(Path(plan), Path(runs), Path(iterations), Path(comparison))
    md_out, html_out = Path(md_out), Path(html_out)
    report = build(t, html_out.parent)
    for out, text in ((md_out, render_markdown(report)), (html_out, render_html(report))):
        write_text(out, text)


def markdown_of(t: SweepTables) -> str:
    """report.md of tables already loaded, no plot drawn (report.md has none)."""
    return render_markdown(build(t, Path("."), plots_too=False))
