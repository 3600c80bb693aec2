"""report.html: one self-contained page (inline CSS from report.css, inline SVG plots, relative log links).
"""

from __future__ import annotations

import datetime as _dt
import html
import os
from pathlib import Path
from typing import Any, Iterable


from graphsweep import __version__
from graphsweep.judge import prose
from graphsweep.report.colours import VERDICT_COLORS
from graphsweep.vocab import BLOCKED, TIMING_VERDICTS
from graphsweep.report.data import Cost, Summary, SweepTables, VERDICT_ORDER, as_number, flag, headroom, id_list, is_control
from graphsweep.report import gpu_time, recommend
from graphsweep.report.captured import GRAPHS_TITLE, graphs_held
from graphsweep.report.plots import TRACE_CAP, cell_anchor, heatmaps_html, memory_svg, shape_grid_html, speedup_bars_svg, traces_svg
from graphsweep.report.shapes import full_grid, shape_axes, varying_axes
from graphsweep.report.text import (
    caveats, cell_label, display_reason, estimate_words, level, fmt_number, fmt_percent, fmt_q, fmt_value,
    md_inline, memory_figure,
)  # fmt: skip

CSS = (Path(__file__).with_name("report.css")).read_text()  # a package file: edited as CSS, inlined per page



def _badge(verdict: str, text: str | None = None, big: bool = False, zero: bool = False) -> str:
    color = VERDICT_COLORS.get(verdict, "#24292f")
    cls = "badge" + (" big" if big else "") + (" zero" if zero else "")
    return f'<span class="{cls} v-{html.escape(verdict)}" style="background:{color}">{html.escape(text or verdict)}</span>'


def _log_links(t: SweepTables, ids: Iterable[str], prefix: str, out_dir: Path, log_paths: dict[str, str]) -> str:
    links = []
    for k, rid in enumerate(ids, 1):
        if rid not in log_paths:  # never submitted (preflight-blocked): no log to link
            continue
        links.append(f'<a href="{html.escape(log_paths[rid])}" title="{html.escape(rid)}">{prefix}{k}</a>')
    return "".join(links)


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


def cells_table_html(t: SweepTables, out_dir: Path) -> str:
    conf = level(t)
    axes = [a for a in t.axes if a in t.comparison.columns]
    one_col = len(axes) > 3  # many axes: one shape column, named on a shape's first row, so the table fits the page
    logs = _relative_log_paths(t, out_dir)
    show_headroom = any(headroom(t, r) is not None for _, r in t.comparison.iterrows())
    head = ("<th>shape</th>" if one_col else "".join(f"<th>{html.escape(a)}</th>" for a in axes)) + (
        f"<th>variant</th><th>verdict</th><th class='num'>speedup [{conf} CI]</th><th class='num'>q</th>"
        "<th class='num'>step ms<br>eager → graph</th><th class='num'>runs<br>e+g</th>"
        f"<th class='num' title='{html.escape(memory_figure(t))}, median across runs'>memory GB<br>eager → graph</th>"
        "<th class='num'>Δ GB</th>"
        + ('<th class="num" title="GPU memory left above the graph arm\'s figure">headroom GB</th>' if show_headroom else "")
        + f"<th class='num' title='{html.escape(GRAPHS_TITLE)}'>graphs</th>"
        + "<th>reason</th><th>logs</th>"
    )
    rows = []
    prev_shape = None
    for _, r in t.comparison.iterrows():
        speed = prose.speedup_text(r, ci=False)
        speed_html = f"<b>{speed}</b>" if as_number(r.get("speedup")) is not None else '<span class="muted">—</span>'
        ci = f' <span class="ci">{prose.ci_text(r)}</span>' if prose.ci_text(r) else ""
        steps = _pair(r.get("eager_step_ms"), r.get("graph_step_ms"))
        mems = _pair(r.get("eager_mem_gb"), r.get("graph_mem_gb"))
        n_e, n_g = as_number(r.get("n_eager")), as_number(r.get("n_graph"))
        n = f"{int(n_e or 0)}+{int(n_g or 0)}" if r.verdict != BLOCKED else "—"
        if r.verdict in TIMING_VERDICTS and flag(r.get("thin")):
            n += ' <span title="an arm of fewer than 3 jobs: its spread is the allowance, not measured">¹</span>'
        reason = display_reason(r)
        if is_control(r) and r.verdict in TIMING_VERDICTS:
            aa_note = "A/A control: eager vs eager, any speedup/slowdown is a false positive"
            reason = f"{reason}; {aa_note}" if reason else aa_note
        e_links = _log_links(t, id_list(r.get("eager_run_ids")), "e", out_dir, logs)
        g_links = _log_links(t, id_list(r.get("graph_run_ids")), "a" if is_control(r) else "g", out_dir, logs)
        links = "<br>".join(x for x in (e_links, g_links) if x)
        verdict = _badge(str(r.verdict)) + (' <span class="muted">A/A</span>' if is_control(r) else "")
        cls = ' class="shape-start"' if prev_shape is not None and r.shape_id != prev_shape else ""
        if one_col:
            label = cell_label(r, axes) if r.shape_id != prev_shape else ""
            tds = f'<td class="shape">{html.escape(label)}</td>'
        else:
            tds = "".join(f"<td>{html.escape(fmt_value(r.get(a)))}</td>" for a in axes)
        prev_shape = r.shape_id
        rows.append(
            f'<tr id="{cell_anchor(r.cell_id)}"{cls} data-verdict="{html.escape(str(r.verdict))}" title="{html.escape(str(r.cell_id))}">{tds}'
            f"<td>{html.escape(str(r.variant))}</td><td>{verdict}</td>"
            f'<td class="num">{speed_html}{ci}</td><td class="num">{fmt_q(r.get("q_value"))}</td>'
            f'<td class="num">{steps}</td><td class="num">{n}</td>'
            f'<td class="num">{mems}</td><td class="num">{fmt_number(r.get("mem_delta_gb"), "+.2f")}</td>'
            + (f'<td class="num">{fmt_number(headroom(t, r), ".1f")}</td>' if show_headroom else "")
            + f'<td class="num graphs">{graphs_held(r) or "—"}</td>'
            + f'<td class="reason" title="{html.escape(str(r.get("reason") or ""))}">{md_inline(reason)}</td><td class="logs">{links.strip() or "—"}</td></tr>'
        )
    return f'<table class="cells"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _pair(eager: Any, graph: Any) -> str:
    e, g = as_number(eager), as_number(graph)
    if e is None and g is None:
        return "—"
    return f"{fmt_number(e, '.2f')} → {fmt_number(g, '.2f')}"


def costs_table_html(cost: Cost) -> str:
    rows = []
    for v in [*VERDICT_ORDER, *[k for k in cost.per_verdict_gpu_h if k not in VERDICT_ORDER]]:
        if v not in cost.per_verdict_gpu_h and v not in cost.per_verdict_cells:
            continue
        h = cost.per_verdict_gpu_h.get(v, 0.0)
        share = h / cost.spent_gpu_h if cost.spent_gpu_h else 0.0
        rows.append(
            f"<tr><td>{_badge(v)}</td><td class='num'>{cost.per_verdict_cells.get(v, 0)}</td>"
            f"<td class='num'>{h:.2f}</td><td class='num'>{fmt_percent(share)}</td></tr>"
        )
    if cost.control_gpu_h:
        rows.append(f"<tr><td>A/A control</td><td></td><td class='num'>{cost.control_gpu_h:.2f}</td>"
                    f"<td class='num'>{fmt_percent(cost.control_gpu_h / cost.spent_gpu_h if cost.spent_gpu_h else 0)}</td></tr>")  # fmt: skip
    if cost.unattributed_gpu_h:
        rows.append(f"<tr><td>runs of no cell</td><td></td><td class='num'>{cost.unattributed_gpu_h:.2f}</td><td></td></tr>")
    rows.append(f"<tr><td><b>total</b></td><td></td><td class='num'><b>{cost.spent_gpu_h:.2f}</b></td><td class='num'>100%</td></tr>")
    return (
        "<table class='costs' style='width:auto;min-width:420px'><thead><tr><th>verdict</th><th class='num'>cells</th>"
        f"<th class='num'>GPU-hours</th><th class='num'>share</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def render_html(t: SweepTables, cost: Cost, s: Summary, out_dir: Path) -> str:
    conf = level(t)
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    badges = "".join(_badge(v, f"{s.counts.get(v, 0)} {v}", big=True, zero=not s.counts.get(v)) for v in VERDICT_ORDER)
    badges += "".join(_badge(v, f"{n} {v}", big=True) for v, n in s.counts.items() if v not in VERDICT_ORDER)

    if s.n_control:
        rate = f"{s.aa_fp / s.aa_judged:.0%}" if s.aa_judged else "n/a"
        aa_card = (f'<div class="card aa"><div class="k">A/A false-positive rate</div><div class="v">{rate}</div>'
                   f'<div class="d">{s.aa_fp} of {s.aa_judged} eager-vs-eager cells flagged; expected ≤ {(1 - t.confidence) * 100:g}%</div></div>')  # fmt: skip
    else:
        aa_card = ('<div class="card aa"><div class="k">A/A false-positive rate</div><div class="v">—</div>'
                   '<div class="d">no A/A control cells were run (aa_control: true)</div></div>')  # fmt: skip
    blocked_d = f"{cost.blocked_runs} preflight-blocked runs, estimated" if cost.blocked_runs else "no run was blocked by preflight"
    if cost.blocked_unestimated:
        blocked_d += f"; {cost.blocked_unestimated} without estimate"
    cards = (
        f'<div class="card"><div class="k">GPU-hours spent</div><div class="v">{cost.spent_gpu_h:.2f}</div>'
        f'<div class="d">{s.n_runs} runs, setup and capture included'
        + (f'; {html.escape(estimate_words(cost))}' if cost.estimated_gpu_h else "") + '</div></div>'
        f'<div class="card"><div class="k">avoided by preflight</div><div class="v">≈{cost.avoided_blocked_gpu_h:.2f}</div>'
        f'<div class="d">{blocked_d}</div></div>'
        f'<div class="card"><div class="k">avoided by shared baselines</div><div class="v">{cost.avoided_shared_gpu_h:.2f}</div>'
        f'<div class="d">vs one eager run per variant (naive ≈{cost.naive_gpu_h:.2f})</div></div>'
        + (f'<div class="card"><div class="k">avoided by the launch gate</div><div class="v">≈{cost.avoided_gate_gpu_h:.2f}</div>'
           f'<div class="d">{cost.gated_runs} graph runs skipped on their eager arm\'s GPU-busy diagnostic</div></div>'
           if cost.gated_runs else "")
        + aa_card
    )

    # A full grid of two or more axes (from the plan) gets a heatmap over its first two axes; any other set of shapes
    # (include: shapes, a one-axis sweep) one grid of shapes x variants: what an engineer compares.
    varying = varying_axes(t)
    heat_note = ('<p class="note">eager / graph step time; green = graph faster, red = slower, pale = within the margin or '
                 "undecided; a cell links to its row.</p>")
    if full_grid(t, varying):
        speed_block = (
            f"<h2>Speedup by {html.escape(varying[0])} × {html.escape(varying[1])}</h2>" + heat_note + heatmaps_html(t, varying)
        )
    else:
        speed_block = "<h2>Speedup per shape and variant</h2>" + heat_note + shape_grid_html(t, shape_axes(t))
        svg = speedup_bars_svg(t) if len(varying) < 2 else ""
        if svg:
            speed_block += (f'<p class="note">bar = speedup (eager / graph), whisker = {conf} interval, grey band = '
                            f"1 ± {t.margin:g}.</p>" + svg)

    mem, mem_drawn, mem_data = memory_svg(t)
    traces, drawn, with_data = traces_svg(t)
    trace_note = (
        f'<p class="note">Showing the first {drawn} of {with_data} cells with iteration data (capped at {TRACE_CAP} '
        "to keep the page light); every run's series is in iterations.parquet.</p>" if with_data > drawn else ""
    )  # fmt: skip
    legend = (
        '<div class="legend"><i style="background:#0969da"></i>eager runs<i style="background:#e16f24"></i>graph runs'
        '<i style="background:#d0d7de;height:10px"></i>warmup<i style="border-top:2px dashed #8250df;height:0"></i>capture iteration'
        "<i style=\"background:linear-gradient(90deg,#0969da,#e16f24);height:4px\"></i>steady window (bars at the bottom: eager, graph)"
        " · ▲ spikes above the scale (setup, capture) · <b style=\"color:#cf222e\">✕</b> run died (OOM, crash)</div>"
    )
    cav = "".join(f"<li>{md_inline(c)}</li>" for c in caveats(t, s))
    desc = f" · {html.escape(t.description)}" if t.description else ""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>graphsweep · {html.escape(t.sweep)}</title><style>{CSS}</style></head><body><main>",
        f"<h1>graphsweep · {html.escape(t.sweep)}</h1>",
        f'<p class="sub">{s.n_cells} cells · {s.n_runs} runs · margin ±{t.margin:g} · {conf} intervals{desc}</p>',
        f'<div class="badges" id="verdict-counts">{badges}</div>',
        f'<div class="cards">{cards}</div>',
        recommend.render_html(t, recommend.recommend(t)),
        f'<ul class="caveats">{cav}</ul>',
        speed_block,
        f"<h2>Cells <span class='muted'>({len(t.comparison)})</span></h2>",
        cells_table_html(t, out_dir),
        '<p class="note">q: Benjamini–Hochberg across the sweep. '
        + ("¹ an arm of fewer than 3 jobs: spread allowance, not measured. " if any(
            r.verdict in TIMING_VERDICTS and flag(r.get("thin")) for _, r in t.comparison.iterrows()) else "")
        + "Logs: e = eager runs, g = graph runs, a = A/A control runs (links relative to this file).</p>",
        "<h2>GPU-hours per verdict</h2>",
        costs_table_html(cost),
        '<p class="note">A cell is charged its graph runs plus an equal share of its shape\'s eager runs. '
        "GPU-seconds = GPUs × wall time of the job.</p>",
        gpu_time.render_html(gpu_time.gpu_time(t.runs)),
    ]
    if mem:
        parts += [
            f"<h2>Memory: {html.escape(memory_figure(t))}</h2>",
            '<div class="legend"><i style="background:#0969da;height:9px"></i>eager<i style="background:#e16f24;height:9px"></i>graph'
            " · median across runs; label: graph − eager</div>",
            mem,
        ]
        if mem_data > mem_drawn:
            parts.append(f'<p class="note">Showing the first {mem_drawn} of {mem_data} cells with memory data; '
                         "every cell's figures are in the table above.</p>")
    if traces:
        parts += ["<h2>Iteration time per run</h2>", legend, traces, trace_note]
    parts.append(
        f"<footer>graphsweep {__version__} · generated {now} from plan.parquet, runs.parquet, iterations.parquet, "
        "comparison.parquet</footer></main></body></html>"
    )
    return "\n".join(parts)
