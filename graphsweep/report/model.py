"""The report as one typed model: what report.md and report.html both show, built once from the four tables. The two
templates (report/templates/) lay it out; words come from report/words.py (and judge/prose.py), the escaping of every
shown text from the templates' one filter (report/markup.py).
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path

from markupsafe import Markup

from graphsweep import __version__
from graphsweep.judge import prose
from graphsweep.report import grids, plots, words
from graphsweep.report.captured import graphs_held
from graphsweep.report.colours import VERDICT_COLORS
from graphsweep.report.data import (
    VERDICT_ORDER, Cost, SweepTables, as_number, cost_accounting, flag, headroom, id_list, is_control,
    summarize,
)  # fmt: skip
from graphsweep.report.gpu_time import GpuTime, gpu_time
from graphsweep.report.recommend import Answer, Recommendation, recommend
from graphsweep.report.shapes import full_grid, shape_axes, varying_axes
from graphsweep.vocab import BLOCKED, SLOWDOWN, SPEEDUP, TIMING_VERDICTS


@dataclass(frozen=True)
class VerdictCount:
    verdict: str
    cells: int
    colour: str

    @property
    def zero(self) -> bool:
        return not self.cells


@dataclass(frozen=True)
class Card:
    what: str
    value: str
    detail: str


@dataclass(frozen=True)
class LogLink:
    href: str  # relative to the report's folder
    run_id: str
    label: str  # e1, g2, a1


@dataclass(frozen=True)
class CellRow:
    """One row of the cells table."""

    cell_id: str
    anchor: str
    shape_start: bool  # the first row of a shape after another shape's
    axis_values: tuple[str, ...]  # one per axis column
    shape_label: str  # the one-column layout (many axes): the shape, on its first row only
    variant: str
    verdict: str
    colour: str
    decided: bool  # speedup or slowdown
    control: bool
    speedup: float | None
    speedup_text: str  # '1.25×', '—'
    speedup_ci: str  # '1.25× [0.97, 1.61]', '—'
    ci: str  # '[0.97, 1.61]'
    q: float | None
    thin: bool  # a timed cell with an arm of fewer than 3 jobs
    runs: str  # '3+3', '—' for a blocked cell
    eager_ms: float | None
    graph_ms: float | None
    eager_mem_gb: float | None
    graph_mem_gb: float | None
    mem_delta_gb: float | None
    headroom_gb: float | None
    graphs: str
    reason: str  # what the table shows (short_reason, shape ids cut)
    aa_note: bool  # a timed A/A control cell: report.html says what its verdict means
    reason_full: str  # the stored sentence (a tooltip)
    eager_logs: tuple[LogLink, ...]
    graph_logs: tuple[LogLink, ...]


@dataclass(frozen=True)
class ShapeAnswer:
    """A shape's entry in Recommendations."""

    shape_id: str
    name: str
    answer: Answer
    headline: str  # 'use full_iteration', 'undecided', 'stay eager', ...
    rests_on: str  # what the headline rests on: the choice's gain, the leading undecided variant, ...
    command: str  # Answer.UNDECIDED: the one command that continues the sweep ('' when the table has none)
    crashes: tuple[str, ...]  # the variants not recommended because a run crashed: which run, why
    details: tuple[str, ...]  # what qualifies it
    variant: str  # the choice's ('' without one)
    colour: str  # the choice's badge: a speedup's
    speedup: str  # the choice's (or the leading undecided variant's), '1.25×'
    ci: str
    steps: str  # 'eager → graph' ms, or the eager step alone
    mem_delta_gb: float | None
    paste_what: str
    paste: str  # the line to paste ('' when the plan has no record of it)
    shared: str  # graph settings both arms ran with
    no_command: bool  # a choice whose overrides the plan does not record


@dataclass(frozen=True)
class CostRow:
    verdict: str
    colour: str
    cells: int
    gpu_hours: float
    share: str


@dataclass(frozen=True)
class GpuTimeSection:
    missing: bool  # runs.parquet has no time_* columns
    parts: tuple[tuple[str, float, str], ...]  # (what, GPU-hours, share)
    runs: int
    total_h: float
    sentences: tuple[str, ...]

    @property
    def shown(self) -> bool:
        return self.missing or bool(self.runs) or bool(self.sentences)


@dataclass(frozen=True)
class Report:
    sweep: str
    description: str
    level: str  # '95%'
    margin: float
    n_cells: int
    n_runs: int
    counts: tuple[VerdictCount, ...]  # every verdict in report order (zero included), then others
    no_cuda: str  # the sweep-level note when graph arms were blocked for want of a CUDA device ('' otherwise)
    intro: str
    answers: tuple[ShapeAnswer, ...]
    caveats: tuple[str, ...]
    cards: tuple[Card, ...]  # the cost figures
    aa_card: Card
    axes: tuple[str, ...]  # the cells table's axis columns
    one_shape_column: bool  # many axes: one shape column
    cells: tuple[CellRow, ...]
    thin_note: bool  # a row carries the thin mark
    show_headroom: bool
    memory_figure: str
    cost_sentence: str
    per_verdict: str
    cost_rows: tuple[CostRow, ...]
    control_gpu_h: float
    unattributed_gpu_h: float
    spent_gpu_h: float
    gpu_time: GpuTimeSection
    heat_axes: tuple[str, ...]  # a full grid's two axes ('' when the shapes are no full grid)
    grids: tuple[grids.Grid, ...]
    bars_svg: Markup
    memory_svg: Markup
    memory_drawn: int
    memory_cells: int
    traces_svg: Markup
    traces_drawn: int
    traces_cells: int
    trace_cap: int
    version: str = __version__
    generated: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def build(t: SweepTables, out_dir: Path, plots_too: bool = True) -> Report:
    """The report of one sweep (`plots_too`: draw the SVG plots, which only report.html shows)."""
    cost, s = cost_accounting(t), summarize(t)
    recs = recommend(t)
    ids = plots.figure_ids()
    mem, mem_drawn, mem_data = plots.memory_svg(t, ids) if plots_too else (Markup(""), 0, 0)
    traces, drawn, with_data = plots.traces_svg(t, ids) if plots_too else (Markup(""), 0, 0)
    varying = varying_axes(t)
    heat = full_grid(t, varying)
    bars = plots.speedup_bars_svg(t, ids) if plots_too and not heat and len(varying) < 2 else Markup("")
    axes = tuple(a for a in t.axes if a in t.comparison.columns)
    rows = _cells(t, axes, out_dir)
    counts = [*[VerdictCount(v, s.counts.get(v, 0), VERDICT_COLORS.get(v, "#24292f")) for v in VERDICT_ORDER],
              *[VerdictCount(v, n, VERDICT_COLORS.get(v, "#24292f")) for v, n in s.counts.items()
                if v not in VERDICT_ORDER]]
    g = gpu_time(t.runs)
    order = [v for v in dict.fromkeys([*VERDICT_ORDER, *cost.per_verdict_gpu_h]) if v in cost.per_verdict_gpu_h]
    return Report(
        sweep=t.sweep, description=t.description, level=words.level(t), margin=t.margin, n_cells=s.n_cells,
        n_runs=s.n_runs, counts=tuple(counts),
        no_cuda=words.NO_CUDA_NOTE if any(r.answer is Answer.NO_GPU for r in recs) else "",
        intro=words.intro(t), answers=tuple(_answer(t, r) for r in recs), caveats=tuple(words.caveats(t, s)),
        cards=tuple(Card(*c) for c in words.cards(cost, s)), aa_card=Card(*words.aa_card(t, s)), axes=axes, one_shape_column=len(axes) > 3,
        cells=rows, thin_note=any(r.thin for r in rows), show_headroom=any(r.headroom_gb is not None for r in rows),
        memory_figure=words.memory_figure(t), cost_sentence=words.cost_sentence(cost),
        per_verdict=words.per_verdict_sentence(cost, order) if order else "", cost_rows=_cost_rows(cost),
        control_gpu_h=cost.control_gpu_h, unattributed_gpu_h=cost.unattributed_gpu_h, spent_gpu_h=cost.spent_gpu_h,
        gpu_time=_gpu_time(g), heat_axes=tuple(varying[:2]) if heat else (),
        grids=tuple(grids.heatmaps(t, varying) if heat else [grids.shape_grid(t, shape_axes(t))]),
        bars_svg=bars, memory_svg=mem, memory_drawn=mem_drawn, memory_cells=mem_data,
        traces_svg=traces, traces_drawn=drawn, traces_cells=with_data, trace_cap=plots.TRACE_CAP,
    )  # fmt: skip


def _answer(t: SweepTables, rec: Recommendation) -> ShapeAnswer:
    ch = rec.choice
    rests_on, details = words.details(rec, t)
    o = rec.overrides
    shown = ch if ch is not None else rec.leader  # whose speedup the HTML table shows
    if ch is not None:
        steps = words.fmt_pair(ch.get("eager_step_ms"), ch.get("graph_step_ms"))
        steps = steps if "—" not in steps else "—"
    else:
        eager = [x for c in rec.cells if (x := as_number(c.get("eager_step_ms"))) is not None]
        steps = f"{eager[0]:.2f} (eager)" if eager else ""
    return ShapeAnswer(
        shape_id=rec.shape_id, name=words.cell_label(rec.cells[0], shape_axes(t)) or rec.shape_id, answer=rec.answer,
        headline=words.headline(rec), rests_on=rests_on,
        command=(rec.to_decide.command or "") if rec.to_decide is not None else "",
        crashes=tuple(words.crash(c) for c in rec.crashed), details=tuple(details),
        variant=str(ch.variant) if ch is not None else "", colour=VERDICT_COLORS[SPEEDUP],
        speedup=prose.speedup_text(shown, ci=False) if shown is not None else "",
        ci=prose.ci_text(shown) if shown is not None else "",
        steps=steps, mem_delta_gb=as_number(ch.get("mem_delta_gb")) if ch is not None else None,
        paste_what=o.what if ch is not None and o is not None else "",
        paste=o.line if ch is not None and o is not None else "",
        shared=o.shared_line if ch is not None and o is not None and o.shared else "",
        no_command=ch is not None and o is None,
    )  # fmt: skip


def _relative_log_paths(t: SweepTables, out_dir: Path) -> dict[str, str]:
    """run_id -> link to its log, relative to the report's folder (so the folder can be archived or moved).

    The sweep layout puts logs at runs/<run_id>/log.txt next to the report; only a log recorded elsewhere
    (an absolute path outside that layout) gets a relative path computed to where it is.
    """
    out: dict[str, str] = {}
    for _, r in t.runs.iterrows():
        rid = str(r.run_id)
        out[rid] = f"runs/{rid}/log.txt"
        lp = r.get("log_path")
        if isinstance(lp, str) and Path(lp).is_absolute() and not lp.endswith(f"runs/{rid}/log.txt"):
            try:
                out[rid] = os.path.relpath(lp, out_dir.resolve()).replace(os.sep, "/")
            except ValueError:  # another drive (Windows): keep the layout
                pass
    return out


def _links(ids: list[str], prefix: str, logs: dict[str, str]) -> tuple[LogLink, ...]:
    # a run never submitted (preflight-blocked) has no log to link
    return tuple(LogLink(logs[rid], rid, f"{prefix}{k}") for k, rid in enumerate(ids, 1) if rid in logs)


def _cells(t: SweepTables, axes: tuple[str, ...], out_dir: Path) -> tuple[CellRow, ...]:
    logs = _relative_log_paths(t, out_dir)
    fields = words.judged_by_fields(t.comparison)
    rows, prev = [], None
    for _, r in t.comparison.iterrows():
        timed = r.verdict in TIMING_VERDICTS
        n_e, n_g = as_number(r.get("n_eager")), as_number(r.get("n_graph"))
        rows.append(CellRow(
            cell_id=str(r.cell_id), anchor=grids.cell_anchor(r.cell_id),
            shape_start=prev is not None and r.shape_id != prev,
            axis_values=tuple(words.fmt_value(r.get(a)) for a in axes),
            shape_label=words.cell_label(r, axes) if r.shape_id != prev else "",
            variant=str(r.variant), verdict=str(r.verdict), colour=VERDICT_COLORS.get(str(r.verdict), "#24292f"),
            decided=r.verdict in (SPEEDUP, SLOWDOWN), control=is_control(r), speedup=as_number(r.get("speedup")),
            speedup_text=prose.speedup_text(r, ci=False), speedup_ci=prose.speedup_text(r),
            ci=prose.ci_text(r), q=as_number(r.get("q_value")), thin=timed and flag(r.get("thin")),
            runs=f"{int(n_e or 0)}+{int(n_g or 0)}" if r.verdict != BLOCKED else "—",
            eager_ms=as_number(r.get("eager_step_ms")), graph_ms=as_number(r.get("graph_step_ms")),
            eager_mem_gb=as_number(r.get("eager_mem_gb")), graph_mem_gb=as_number(r.get("graph_mem_gb")),
            mem_delta_gb=as_number(r.get("mem_delta_gb")), headroom_gb=headroom(t, r), graphs=graphs_held(r),
            reason=words.display_reason(r, fields), aa_note=is_control(r) and timed,
            reason_full=words.reason(r, fields),
            eager_logs=_links(id_list(r.get("eager_run_ids")), "e", logs),
            graph_logs=_links(id_list(r.get("graph_run_ids")), "a" if is_control(r) else "g", logs),
        ))  # fmt: skip
        prev = r.shape_id
    return tuple(rows)


def _cost_rows(cost: Cost) -> tuple[CostRow, ...]:
    out = []
    for v in [*VERDICT_ORDER, *[k for k in cost.per_verdict_gpu_h if k not in VERDICT_ORDER]]:
        if v not in cost.per_verdict_gpu_h and v not in cost.per_verdict_cells:
            continue
        h = cost.per_verdict_gpu_h.get(v, 0.0)
        share = words.fmt_percent(h / cost.spent_gpu_h if cost.spent_gpu_h else 0.0)
        out.append(CostRow(v, VERDICT_COLORS.get(v, "#24292f"), cost.per_verdict_cells.get(v, 0), h, share))
    return tuple(out)


def _gpu_time(g: GpuTime) -> GpuTimeSection:
    parts = tuple((words.gpu_part(part, n), h, words.share(h, g.total_h)) for part, h, n in g.parts)
    return GpuTimeSection(g.missing, parts, g.runs, g.total_h, tuple(words.gpu_time_sentences(g)))

