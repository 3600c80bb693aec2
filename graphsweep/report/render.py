"""The two templates that lay out the report model (report/model.py): report.html.j2 through Jinja2 with autoescape,
report.md.j2 with the Markdown filter on every expression (report/markup.py). The templates and the stylesheet are
package data (report/templates/), loaded with the package.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Iterable

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from graphsweep.report import words
from graphsweep.report.markup import Md, html_finalize, html_words, md_cell, md_code, md_finalize, md_text
from graphsweep.report.model import CellRow, Report

TEMPLATES = "templates"  # report/templates/: report.md.j2, report.html.j2, report.css


def _num(value: Any, spec: str = ".1f", suffix: str = "") -> str:
    return words.fmt_number(value, spec, suffix)


def _md_row(cells: Iterable[Any]) -> Md:
    """A row of a Markdown table: each cell escaped, no pipe or line break ends it."""
    return Md("| " + " | ".join(md_cell(c) for c in cells) + " |")


def _md_verdict(c: CellRow) -> Md:
    """A cell's verdict in the Markdown table: a decided speedup or slowdown in bold, an A/A control marked."""
    text = md_text(c.verdict)
    return Md((f"**{text}**" if c.decided else text) + (" (A/A)" if c.control else ""))


def _common(env: Environment) -> Environment:
    env.filters.update(num=_num, q=words.fmt_q, cut=words.truncate)
    env.globals.update(words=words)
    return env


@cache
def _markdown_env() -> Environment:
    env = Environment(loader=PackageLoader("graphsweep.report", TEMPLATES), autoescape=False, finalize=md_finalize,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(row=_md_row, code=lambda s: Md(md_code(str(s))), text=md_text, verdict=_md_verdict)
    return _common(env)


@cache
def _html_env() -> Environment:
    env = Environment(loader=PackageLoader("graphsweep.report", TEMPLATES), autoescape=True, finalize=html_finalize,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(words=html_words)
    return _common(env)


def render_markdown(report: Report) -> str:
    return _markdown_env().get_template("report.md.j2").render(r=report)


def render_html(report: Report) -> str:
    return _html_env().get_template("report.html.j2").render(r=report, css=Markup(_css()))


def _css() -> str:
    env = _html_env()
    assert env.loader is not None
    return env.loader.get_source(env, "report.css")[0]
