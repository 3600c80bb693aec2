"""The report's plots: matplotlib (Agg) drawn as inline SVG, deterministic for the same tables (the element ids of
each figure are numbered per report, so the same tables give the same page).

Text in a plot is a name from a spec or a table: its control characters are spelled out and a `$` is a dollar sign,
never the start of matplotlib's math text (`label`).
"""

from __future__ import annotations

import io
import itertools
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Iterator

import matplotlib
import numpy as np
import pandas as pd
from markupsafe import Markup, escape

matplotlib.use("Agg", force=True)  # files only: no display, and the same on every machine
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from graphsweep.judge import prose
from graphsweep.report.data import SweepTables, as_number, id_list, is_control
from graphsweep.report.shapes import shape_axes, varying_axes
from graphsweep.report.words import cell_label, memory_figure
from graphsweep.report.colours import VERDICT_COLORS
from graphsweep.textsafe import spelled
from graphsweep.vocab import AA, EAGER, GRAPH, OOM, USABLE_OUTCOMES

EAGER_COLOR, GRAPH_COLOR = "#0969da", "#e16f24"

TRACE_CAP = 24  # cells with iteration-time traces; more make the page slow and the screenshot unreadable

MEMORY_CAP = 60  # cells in the memory chart

_TRACE_POINTS = 300  # points per trace line (longer runs are thinned with a stride)


def figure_ids() -> Iterator[int]:
    """The numbers of one report's figures (each report starts at 1: the same tables give the same page)."""
    return itertools.count(1)


def plot_text(text: Any) -> str:
    """A name as plot text: control characters spelled out, `$` a dollar sign (not matplotlib's math text)."""
    return spelled(str(text)).replace("$", r"\$")


def _plt() -> Any:
    plt.rcParams.update({
        "svg.fonttype": "none",  # text stays text: the page's fonts, selectable, small files
        "svg.hashsalt": "graphsweep",  # deterministic ids: the same tables give the same file
        "font.family": "sans-serif",
        "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial"],
        "font.size": 9,
        "axes.titlesize": 9,
        "axes.labelsize": 8.5,
        "xtick.labelsize": 8,
        "ytick.labelsize": 8,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.edgecolor": "#8c959f",
        "axes.linewidth": 0.6,
        "xtick.color": "#57606a",
        "ytick.color": "#57606a",
        "legend.fontsize": 8,
        "legend.frameon": False,
    })  # fmt: skip
    return plt


def _svg(fig: Any, css_class: str, aria: str, ids: Iterator[int]) -> Markup:
    """The figure as inline SVG: no XML prologue, no namespace URLs, ids unique within the page. matplotlib writes
    its text XML-escaped; the page takes the SVG as it is."""
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight", pad_inches=0.05)
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg)
    n = next(ids)
    svg = re.sub(r'\bid="([^"]+)"', rf'id="f{n}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#f{n}-\1)", svg)
    svg = re.sub(r'href="#([^"]+)"', rf'href="#f{n}-\1"', svg)
    # Scale with the page: keep the viewBox, drop the fixed size.
    svg = re.sub(r'<svg([^>]*?)\swidth="([\d.]+)pt"\sheight="([\d.]+)pt"', _svg_size, svg, count=1)
    return Markup(svg.replace("<svg", f'<svg class="plot {css_class}" role="img" aria-label="{escape(aria)}"', 1))


def _svg_size(m: re.Match[str]) -> str:
    w = float(m.group(2)) * 96 / 72  # pt -> CSS px
    return f'<svg{m.group(1)} style="max-width:{w:.0f}px" width="100%"'


def speedup_bars_svg(t: SweepTables, ids: Iterator[int]) -> Markup:
    """Speedup with its interval per cell (sweeps with fewer than two varying axes): one panel per variant with a bar
    per shape, or, for a sweep of one shape, one panel with a bar per variant."""
    plt = _plt()
    c = t.comparison[t.comparison.variant != AA]
    variants = list(dict.fromkeys(c.variant))
    if not variants:
        return Markup("")
    axes = shape_axes(t)
    if c.shape_id.nunique() == 1:
        panels = [(cell_label(c.iloc[0], axes), c, lambda r: str(r.variant))]  # fmt: skip
    else:
        panels = [(str(v), c[c.variant == v], lambda r: cell_label(r, axes) or str(r.shape_id)) for v in variants]
    rows_max = max(len(sub) for _, sub, _ in panels)
    ncol = min(len(panels), 3)
    nrow = math.ceil(len(panels) / ncol)
    fig, axs = plt.subplots(
        nrow, ncol, figsize=(4.3 * ncol, 0.6 + nrow * (0.5 + 0.24 * rows_max)), squeeze=False, sharex=True
    )
    # as_number per value (a float Series' map would turn its None back into NaN)
    vals = [x for x in map(as_number, pd.concat([c.ci_low, c.ci_high, c.speedup])) if x is not None] or [1.0]
    lo_x, hi_x = min(min(vals), 1 - 2 * t.margin) * 0.95, max(max(vals), 1 + 2 * t.margin) * 1.05
    for ax, (title, sub, label) in zip(axs.flat, panels):
        y = np.arange(len(sub))[::-1]
        ax.axvspan(1 - t.margin, 1 + t.margin, color="#d0d7de", alpha=0.45, lw=0)
        ax.axvline(1.0, color="#57606a", lw=0.8)
        for yi, (_, r) in zip(y, sub.iterrows()):
            col = VERDICT_COLORS.get(r.verdict, "#24292f")
            s, lo, hi = as_number(r.speedup), as_number(r.ci_low), as_number(r.ci_high)
            if s is None:
                ax.text(1.0, yi, f" {plot_text(r.verdict)}", va="center", ha="center", fontsize=7.5, color=col, fontweight="bold")
                continue
            ax.barh(yi, s - 1.0, left=1.0, height=0.6, color=col, alpha=0.85)
            if lo is not None and hi is not None:
                ax.errorbar(s, yi, xerr=[[s - lo], [hi - s]], fmt="none", ecolor="#24292f", elinewidth=1, capsize=2)
        ax.set_yticks(y, [plot_text(label(r)) for _, r in sub.iterrows()])
        ax.set_title(plot_text(title), loc="left", fontweight="bold")
        ax.set_xlim(lo_x, hi_x)
        ax.set_xlabel("speedup (eager / graph), bar = median, whisker = interval")
    for ax in list(axs.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    return _svg(fig, "speedup-bars", "speedup per cell and variant", ids)


def cell_name(t: SweepTables, row: pd.Series) -> str:
    """A cell in a plot label: the axes that tell its shape from the others', and its variant (only the variant
    when the sweep has one shape)."""
    axes = varying_axes(t)
    if not axes:
        return plot_text(row.variant)
    return plot_text(f"{cell_label(row, axes) or row.shape_id} · {row.variant}")


def memory_svg(t: SweepTables, ids: Iterator[int], cap: int = MEMORY_CAP) -> tuple[Markup, int, int]:
    """Peak memory after capture, eager vs graph, one pair of bars per cell; (svg, cells drawn, cells with data)."""
    plt = _plt()
    c = t.comparison[t.comparison.variant != AA]
    rows = [
        r for _, r in c.iterrows()
        if as_number(r.get("eager_mem_gb")) is not None or as_number(r.get("graph_mem_gb")) is not None
    ]  # fmt: skip
    n_data = len(rows)
    rows = rows[:cap]
    if not rows:
        return Markup(""), 0, 0
    n = len(rows)
    fig, ax = plt.subplots(figsize=(9.5, 0.55 + 0.3 * n))
    y = np.arange(n)[::-1]
    e = [as_number(r.get("eager_mem_gb")) for r in rows]
    g = [as_number(r.get("graph_mem_gb")) for r in rows]
    top = max([v for v in e + g if v is not None] or [1.0])
    ax.barh(y + 0.19, [v or 0 for v in e], height=0.36, color=EAGER_COLOR, label=EAGER)
    ax.barh(y - 0.19, [v or 0 for v in g], height=0.36, color=GRAPH_COLOR, label=GRAPH)
    for yi, r, ev, gv in zip(y, rows, e, g):
        if gv is None:
            note = "graph: " + ("OOM" if r.verdict == OOM else plot_text(r.verdict))
            color = VERDICT_COLORS.get(r.verdict, "#24292f")
            ax.text(top * 0.01, yi - 0.19, note, va="center", fontsize=7.5, color=color, fontweight="bold")
        d = as_number(r.get("mem_delta_gb"))
        if d is not None and ev:
            label = f"{d:+.2f} GB ({d / ev:+.0%})"
            ax.text(max(ev, gv or 0) + top * 0.01, yi, label, va="center", fontsize=7.5, color="#57606a")
    ax.set_yticks(y, [cell_name(t, r) for r in rows])
    ax.set_xlim(0, top * 1.22)
    ax.set_xlabel(plot_text(f"{memory_figure(t)} (GB)"))
    fig.tight_layout()
    return _svg(fig, "memory-bars", f"{memory_figure(t)}, eager vs graph per cell", ids), len(rows), n_data


@dataclass
class _Trace:
    run_id: str
    arm: str  # eager | graph
    it: np.ndarray
    ms: np.ndarray
    warmup: int | None
    capture: int | None
    steady: tuple[int, int] | None
    failed_at: int | None = None  # iteration that was running when the run died (OOM, crash)


def _traces_for(
    t: SweepTables, row: pd.Series, by_run: dict[str, pd.DataFrame], runs: pd.DataFrame, plan: pd.DataFrame
) -> list[_Trace]:
    out = []
    for arm, ids in ((EAGER, id_list(row.get("eager_run_ids"))), (GRAPH, id_list(row.get("graph_run_ids")))):
        for rid in ids:
            it = by_run.get(rid)
            if it is None or not len(it):
                continue
            r = runs.loc[rid] if rid in runs.index else {}
            p = plan.loc[rid] if rid in plan.index else {}
            # paired arms are not plan rows (their job is): the runs table carries the same warmup
            warm = as_number(p.get("warmup")) if len(p) else (as_number(r.get("warmup")) if len(r) else None)
            first, last = as_number(r.get("steady_first")) if len(r) else None, as_number(r.get("steady_last")) if len(r) else None
            cap = as_number(r.get("capture_iteration")) if len(r) else None
            failed = as_number(r.get("failed_iteration")) if len(r) and r.get("outcome") not in USABLE_OUTCOMES else None
            if cap is None and arm == GRAPH and warm is not None and not is_control(row):
                cap = warm + 1  # the capture iteration follows cuda_graph_warmup_steps eager steps (spec.total_iterations)
            x = it.iteration.to_numpy(dtype=float)
            y = it.elapsed_ms.to_numpy(dtype=float)
            if x.size > _TRACE_POINTS:  # thin long runs, keeping the first iterations (warmup, capture)
                stride = math.ceil(x.size / _TRACE_POINTS)
                keep = np.zeros(x.size, bool)
                keep[::stride] = True
                keep[: min(x.size, 12)] = True
                x, y = x[keep], y[keep]
            out.append(_Trace(rid, arm, x, y, None if warm is None else int(warm), None if cap is None else int(cap),
                              (int(first), int(last)) if first is not None and last is not None else None,
                              None if failed is None else int(failed)))  # fmt: skip
    return out


def traces_svg(t: SweepTables, ids: Iterator[int], cap: int = TRACE_CAP) -> tuple[Markup, int, int]:
    """Iteration time of every run of both arms per cell (thin lines); (svg, cells drawn, cells with data)."""
    plt = _plt()
    it = t.iterations.dropna(subset=["elapsed_ms"])
    by_run = {k: g.sort_values("iteration") for k, g in it.groupby("run_id")} if len(it) else {}
    runs = t.runs.set_index("run_id", drop=False) if len(t.runs) else t.runs
    plan = t.plan.set_index("run_id", drop=False)
    order = sorted(t.comparison.index, key=lambda i: (is_control(t.comparison.loc[i]), i))
    drawn: list[tuple[pd.Series, list[_Trace]]] = []
    eager_only: dict[str, tuple[pd.Series, list[_Trace]]] = {}
    with_graph: set[str] = set()
    for i in order:
        row = t.comparison.loc[i]
        tr = _traces_for(t, row, by_run, runs, plan)
        if any(x.arm == GRAPH for x in tr):
            drawn.append((row, tr))
            with_graph.add(row.shape_id)
        elif tr:  # only the shared eager baseline has data: show it once per shape, not once per variant
            eager_only.setdefault(row.shape_id, (row, tr))
    cells = drawn + [v for k, v in eager_only.items() if k not in with_graph]
    n_data = len(cells)
    cells = cells[:cap]
    if not cells:
        return Markup(""), 0, 0
    ncol = 4 if len(cells) >= 4 else len(cells)
    nrow = math.ceil(len(cells) / ncol)
    fig, axs = plt.subplots(nrow, ncol, figsize=(3.35 * ncol, 0.35 + 1.95 * nrow), squeeze=False)
    for ax, (row, trs) in zip(axs.flat, cells):
        steady_vals = []
        for tr in trs:
            if tr.steady:
                m = (tr.it >= tr.steady[0]) & (tr.it <= tr.steady[1])
                steady_vals.extend(tr.ms[m])
        ref = np.asarray(steady_vals) if steady_vals else np.concatenate([tr.ms[len(tr.ms) // 3 :] for tr in trs])
        top = float(np.percentile(ref, 98)) * 1.6 if ref.size else float(max(tr.ms.max() for tr in trs))
        clipped = 0
        for tr in trs:
            col = EAGER_COLOR if tr.arm == EAGER else GRAPH_COLOR
            ax.plot(tr.it, np.minimum(tr.ms, top), color=col, lw=0.8, alpha=0.8)
            over = tr.ms > top
            clipped += int(over.sum())
            if over.any():
                ax.plot(tr.it[over], np.full(int(over.sum()), top), ls="none", marker="^", ms=3, color=col, alpha=0.8)
            if tr.failed_at is not None:  # where the run died: the last logged time, or the axis floor
                y_fail = float(tr.ms[tr.it <= tr.failed_at][-1]) if np.any(tr.it <= tr.failed_at) else 0.0
                ax.plot([tr.failed_at], [min(y_fail, top)], ls="none", marker="X", ms=6, color="#cf222e", mec="white",
                        mew=0.6)  # fmt: skip
        warm = max((tr.warmup for tr in trs if tr.warmup is not None), default=None)
        if warm:
            ax.axvspan(0.5, warm + 0.5, color="#d0d7de", alpha=0.5, lw=0)
        caps = {tr.capture for tr in trs if tr.capture is not None}
        for c in caps:
            ax.axvline(c, color="#8250df", lw=0.9, ls="--")
        for k, arm in enumerate((EAGER, GRAPH)):
            wins = [tr.steady for tr in trs if tr.arm == arm and tr.steady]
            if wins:
                a, b = min(w[0] for w in wins), max(w[1] for w in wins)
                col = EAGER_COLOR if arm == EAGER else GRAPH_COLOR
                ax.plot([a, b], [0.03 + 0.05 * k] * 2, transform=ax.get_xaxis_transform(), color=col, lw=3,
                        solid_capstyle="butt", alpha=0.7)  # fmt: skip
        ax.set_ylim(0, top * 1.04)
        verdict = plot_text(row.verdict)
        ax.set_title(textwrap.fill(cell_name(t, row), 46), loc="left", fontsize=8, pad=12)
        ax.text(0.0, 1.01, f"{verdict}  {prose.speedup_text(row, ci=False) if as_number(row.get('speedup')) else ''}",
                transform=ax.transAxes, fontsize=7.5, color=VERDICT_COLORS.get(verdict, "#24292f"),
                fontweight="bold", va="bottom")  # fmt: skip
        if clipped:
            ax.text(1.0, 1.01, f"{clipped} pts clipped ▲", transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=6.5, color="#6e7781")  # fmt: skip
        ax.tick_params(length=2, pad=1.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.set_ylabel("ms", labelpad=1)
    for ax in list(axs.flat)[len(cells) :]:
        ax.axis("off")
    fig.tight_layout(h_pad=0.8, w_pad=0.6)
    return _svg(fig, "traces", "iteration time per run, eager and graph arms", ids), len(cells), n_data
