"""The speedup grids of report.html as data: a heatmap per variant over the first two varying axes (a full grid), or
one grid of shapes x variants; the template draws them. A square's colour never claims more than its verdict."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from graphsweep.judge import prose
from graphsweep.report.colours import VERDICT_COLORS
from graphsweep.report.data import SweepTables, as_number

from graphsweep.report.shapes import fmt_value, shapes
from graphsweep.report.words import judged_by_fields, reason
from graphsweep.vocab import AA, INCONCLUSIVE, NEUTRAL, SLOWDOWN, SPEEDUP


@dataclass(frozen=True)
class Square:
    """One cell as a coloured square linking to its row of the cells table."""

    anchor: str
    verdict: str
    background: str
    colour: str  # of its text
    ring: str  # an undecided cell's ring in its verdict colour ('' for none)
    main: str  # its speedup, or its verdict where it has none
    ci: str
    sub: str  # its verdict under a speedup
    reason: str  # the whole sentence, as a tooltip


@dataclass(frozen=True)
class Grid:
    title: str  # the variant ('' for the grid of shapes x variants)
    facet: str  # the values of the further axes ('a=1, b=2')
    corner: str  # 'y-axis \\ x-axis' ('' for the grid of shapes x variants)
    axis_heads: tuple[str, ...]  # the row heads' names (shape grid: the axes that name a shape)
    columns: tuple[str, ...]
    rows: tuple[tuple[tuple[str, ...], tuple[Square | None, ...]], ...]  # (row heads, squares: None where no cell)


def cell_anchor(cell_id: Any) -> str:
    return "cell-" + re.sub(r"[^A-Za-z0-9_.-]", "_", str(cell_id))


def heat_color(s: float | None, verdict: str) -> tuple[str, str]:
    """(background, text colour) of a heatmap cell: green for faster, red for slower, by log ratio.

    A decided speedup/slowdown is always clearly coloured; neutral and inconclusive cells stay pale,
    so the colour never claims more than the verdict.
    """
    if s is None:
        return VERDICT_COLORS.get(verdict, "#24292f"), "#ffffff"
    x = min(1.0, abs(math.log(s)) / math.log(1.5)) ** 0.7  # saturates at 1.5x either way
    a = 0.45 + 0.55 * x if verdict in (SPEEDUP, SLOWDOWN) else 0.22 * x
    base = (26, 127, 55) if s >= 1 else (207, 34, 46)
    r, g, b = (round(255 + (c - 255) * a) for c in base)
    return f"#{r:02x}{g:02x}{b:02x}", "#ffffff" if a > 0.5 else "#1f2328"


def square(r: pd.Series | None, fields: bool) -> Square | None:
    if r is None:
        return None
    s = as_number(r.speedup)
    verdict = str(r.verdict)
    bg, fg = heat_color(s, verdict)
    ring = VERDICT_COLORS[verdict] if verdict in (NEUTRAL, INCONCLUSIVE) else ""
    return Square(cell_anchor(r.cell_id), verdict, bg, fg, ring,
                  prose.speedup_text(r, ci=False) if s is not None else verdict, prose.ci_text(r),
                  verdict if s is not None else "", reason(r, fields))


def shape_grid(t: SweepTables, axes: list[str]) -> Grid:
    """Speedup of every cell: one row per shape (its axis values in the first columns), one column per variant."""
    c = t.comparison[t.comparison.variant != AA]
    fields = judged_by_fields(c)
    variants = [str(v) for v in dict.fromkeys(c.variant)]
    sids = list(dict.fromkeys([*shapes(t).get("shape_id", []), *c.shape_id]))
    by = {(r.shape_id, str(r.variant)): r for _, r in c.iterrows()}
    first = {sid: g.iloc[0] for sid, g in c.groupby("shape_id", sort=False)}
    rows = []
    for sid in sids:
        if sid not in first:  # a shape without a graph cell (only an A/A control)
            continue
        heads = tuple(fmt_value(first[sid].get(a)) for a in axes) or (str(sid),)
        rows.append((heads, tuple(square(by.get((sid, v)), fields) for v in variants)))
    return Grid("", "", "", tuple(axes) or ("shape",), tuple(variants), tuple(rows))


def heatmaps(t: SweepTables, varying: list[str]) -> list[Grid]:
    """Speedup over the first two varying axes, one grid per variant (and per value of any further axis)."""
    c = t.comparison[t.comparison.variant != AA]
    fields = judged_by_fields(c)
    ya, xa = varying[0], varying[1]
    rest = varying[2:]
    xs = list(dict.fromkeys(c[xa].map(fmt_value)))
    ys = list(dict.fromkeys(c[ya].map(fmt_value)))
    out = []
    for variant in dict.fromkeys(c.variant):
        sub = c[c.variant == variant]
        groups = sub.groupby([sub[a].map(fmt_value) for a in rest], sort=False) if rest else [((), sub)]
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            facet = ", ".join(f"{a}={k}" for a, k in zip(rest, key) if k)  # an unset axis: nothing to say
            by = {(fmt_value(r[ya]), fmt_value(r[xa])): r for _, r in g.iterrows()}
            rows = tuple(((yv,), tuple(square(by.get((yv, xv)), fields) for xv in xs)) for yv in ys)
            out.append(Grid(str(variant), facet, f"{ya} \\ {xa}", (), tuple(xs), rows))
    return out
