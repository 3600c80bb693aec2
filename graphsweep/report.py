"""The sweep's report: report.md (pasted into a pull request) and report.html (one self-contained file).

Reads the four tables of a sweep (plan, runs, iterations, comparison) and nothing else, so a report can be
regenerated from archived Parquet files. The HTML needs no network: CSS is inline and every plot is an
inline SVG drawn by matplotlib (Agg backend); log links are relative to the report's folder.
"""

from __future__ import annotations

import datetime as _dt
import html
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from graphsweep import __version__, stats
from graphsweep.tables import PLAN_COLUMNS, read_table

# Order in which verdicts are counted and listed: results first, then what blocked a result.
VERDICT_ORDER = (
    "speedup", "slowdown", "neutral", "inconclusive", "blocked", "oom", "invalid", "failed", "baseline-failed",
)  # fmt: skip
TIMING = ("speedup", "slowdown", "neutral", "inconclusive")
# speedup green, slowdown red, neutral grey, inconclusive amber, the rest purple / dark.
VERDICT_COLORS = {
    "speedup": "#1a7f37",
    "slowdown": "#cf222e",
    "neutral": "#6e7781",
    "inconclusive": "#b08800",
    "blocked": "#8250df",
    "oom": "#5b2bb5",
    "invalid": "#953800",
    "failed": "#24292f",
    "baseline-failed": "#424a53",
    "not-comparable": "#57606a",  # arms ran in different environments (graphsweep/provenance.py)
}
EAGER_COLOR, GRAPH_COLOR = "#0969da", "#e16f24"
TRACE_CAP = 24  # cells with iteration-time traces; more make the page slow and the screenshot unreadable
MEMORY_CAP = 60  # cells in the memory chart
_TRACE_POINTS = 300  # points per trace line (longer runs are thinned with a stride)
CONTROL_VARIANT = "aa"


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


@dataclass
class SweepTables:
    plan: pd.DataFrame
    runs: pd.DataFrame
    iterations: pd.DataFrame
    comparison: pd.DataFrame
    axes: list[str]  # sweep axes: plan columns beyond PLAN_COLUMNS
    margin: float
    confidence: float
    sweep: str
    description: str = ""


def _extra(path: Path) -> dict[str, Any]:
    meta = pq.read_schema(path).metadata or {}
    try:
        return json.loads(meta.get(b"graphsweep.extra", b"{}"))
    except json.JSONDecodeError:
        return {}


def load_tables(plan: Path, runs: Path, iterations: Path, comparison: Path) -> SweepTables:
    p = read_table(plan, "plan")
    r = read_table(runs, "runs") if Path(runs).exists() else pd.DataFrame({"run_id": pd.Series(dtype=str)})
    it = read_table(iterations, "iterations") if Path(iterations).exists() else pd.DataFrame()
    c = read_table(comparison, "comparison")
    for col in ("run_id", "iteration", "elapsed_ms"):
        if col not in it.columns:
            it[col] = pd.Series(dtype=float)
    axes = [col for col in p.columns if col not in PLAN_COLUMNS]
    cx = _extra(Path(comparison))
    spec = _extra(Path(plan)).get("spec", {}) or {}
    margin = cx.get("margin")
    if margin is None:
        margin = _first_valid(c.get("margin"), spec.get("margin", 0.02))
    confidence = _first_valid(c.get("confidence"), spec.get("confidence", 0.95))
    sweep = _first_valid(c.get("sweep"), None) or _first_valid(p.get("sweep"), None) or spec.get("sweep") or "sweep"
    return SweepTables(
        plan=p, runs=r, iterations=it, comparison=c.reset_index(drop=True), axes=axes, margin=float(margin),
        confidence=float(confidence), sweep=str(sweep), description=str(spec.get("description") or ""),
    )  # fmt: skip


def _first_valid(series: pd.Series | None, default: Any) -> Any:
    if series is None:
        return default
    s = series.dropna()
    return s.iloc[0] if len(s) else default


def _num(value: Any) -> float | None:
    """A finite float, or None for missing values (None, NaN, pd.NA, non-numbers)."""
    if value is None or isinstance(value, (list, tuple, np.ndarray, dict)):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _ids(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    return [str(v) for v in list(value)]


def _is_control(row: pd.Series | dict[str, Any]) -> bool:
    return row.get("variant") == CONTROL_VARIANT


# --------------------------------------------------------------------------------------------
# Cost accounting (GPU-seconds = GPUs x wall time of the job, setup and capture included)
# --------------------------------------------------------------------------------------------


@dataclass
class Cost:
    spent_gpu_h: float  # every submitted run
    per_verdict_gpu_h: dict[str, float]  # graph-arm runs of the cell + its share of the shape's eager runs
    control_gpu_h: float  # A/A control cells (graph side + share of eager)
    unattributed_gpu_h: float  # runs no comparison row refers to
    avoided_blocked_gpu_h: float  # preflight-blocked runs, at their estimated cost
    blocked_runs: int
    blocked_unestimated: int  # blocked runs without any estimate (not in the figure above)
    avoided_shared_gpu_h: float  # one eager baseline per shape instead of one per variant
    naive_gpu_h: float  # spent + both avoided figures (control cells excluded from the naive design)
    per_verdict_cells: dict[str, int] = field(default_factory=dict)


def _run_cost(runs: pd.DataFrame) -> dict[str, float]:
    if "gpu_seconds" not in runs.columns or not len(runs):
        return {}
    return {str(k): float(v) for k, v in zip(runs.run_id, runs.gpu_seconds) if _num(v) is not None}


def _blocked_estimate(t: SweepTables, row: pd.Series, cost: dict[str, float]) -> float | None:
    """Estimated GPU-seconds of a blocked run: the planner's estimate, else what the shape's runs cost."""
    est = _num(row.get("est_gpu_seconds"))
    if est:  # the plan writes 0.0 for blocked runs; only a positive figure is an estimate
        return est
    same = [cost[r] for r in t.plan.run_id[t.plan.shape_id == row.shape_id] if r in cost]
    if same:
        return float(np.median(same))
    gpus = _num(row.get("gpus")) or 1.0
    per_gpu = [
        cost[r] / (_num(g) or 1.0) for r, g in zip(t.plan.run_id, t.plan.get("gpus", [1] * len(t.plan))) if r in cost
    ]
    return float(np.median(per_gpu)) * gpus if per_gpu else None


def cost_accounting(t: SweepTables) -> Cost:
    cost = _run_cost(t.runs)
    spent = sum(cost.values())
    # an eager run is shared by the cells that reference it (all variants of a shape; one cell when paired)
    eager_users: dict[str, int] = {}
    for _, c in t.comparison.iterrows():
        for r in _ids(c.get("eager_run_ids")):
            eager_users[r] = eager_users.get(r, 0) + 1
    per_verdict: dict[str, float] = {}
    per_cells: dict[str, int] = {}
    control = 0.0
    attributed: set[str] = set()
    for _, c in t.comparison.iterrows():
        eager_ids, graph_ids = _ids(c.get("eager_run_ids")), _ids(c.get("graph_run_ids"))
        attributed.update(eager_ids)
        attributed.update(graph_ids)
        secs = sum(cost.get(r, 0.0) for r in graph_ids)
        secs += sum(cost.get(r, 0.0) / eager_users[r] for r in eager_ids)
        if _is_control(c):
            control += secs
        else:
            per_verdict[c.verdict] = per_verdict.get(c.verdict, 0.0) + secs
            per_cells[c.verdict] = per_cells.get(c.verdict, 0) + 1
    unattributed = sum(v for k, v in cost.items() if k not in attributed)

    blocked = t.plan[t.plan.status == "blocked"] if "status" in t.plan.columns else t.plan.iloc[:0]
    avoided_blocked, unestimated = 0.0, 0
    for _, row in blocked.iterrows():
        est = _blocked_estimate(t, row, cost)
        if est is None:
            unestimated += 1
        else:
            avoided_blocked += est

    # Naive design: every variant of a shape runs its own eager baseline. Sharing saves (k - 1) eager
    # baselines per shape, k = variants of the shape that were submitted (preflight-blocked ones are counted
    # above; control cells are not variants).
    avoided_shared = 0.0
    eager = t.plan[t.plan.arm == "eager"]
    preflight_blocked = set(blocked.run_id)
    for sid, rows in eager.groupby("shape_id"):
        cells = t.comparison[(t.comparison.shape_id == sid) & (t.comparison.variant != CONTROL_VARIANT)]
        k = sum(not set(_ids(ids)) <= preflight_blocked for ids in cells.graph_run_ids)
        e_secs = sum(cost.get(r, 0.0) for r in rows.run_id)
        avoided_shared += max(0, k - 1) * e_secs
    h = 1 / 3600.0
    return Cost(
        spent_gpu_h=spent * h,
        per_verdict_gpu_h={k: v * h for k, v in per_verdict.items()},
        control_gpu_h=control * h,
        unattributed_gpu_h=unattributed * h,
        avoided_blocked_gpu_h=avoided_blocked * h,
        blocked_runs=len(blocked),
        blocked_unestimated=unestimated,
        avoided_shared_gpu_h=avoided_shared * h,
        naive_gpu_h=(spent - control) * h + avoided_shared * h + avoided_blocked * h,
        per_verdict_cells=per_cells,
    )


# --------------------------------------------------------------------------------------------
# Facts shared by both reports
# --------------------------------------------------------------------------------------------


@dataclass
class Summary:
    counts: dict[str, int]  # verdict -> cells (control cells excluded)
    n_cells: int
    n_runs: int
    n_control: int
    aa_fp: int
    aa_judged: int
    single_repeat_cells: list[str]  # cells whose interval is within-run only
    bh_m: int  # cells in the Benjamini-Hochberg family
    fdr_fragile: list[str]  # speedup/slowdown cells whose q-value exceeds 1 - confidence


def summarize(t: SweepTables) -> Summary:
    c = t.comparison
    main = c[c.variant != CONTROL_VARIANT] if len(c) else c
    ctrl = c[c.variant == CONTROL_VARIANT] if len(c) else c
    counts = {v: int((main.verdict == v).sum()) for v in VERDICT_ORDER} if len(main) else {}
    for v in main.verdict.unique() if len(main) else []:
        counts.setdefault(v, int((main.verdict == v).sum()))
    aa_fp, aa_judged, _ = stats.aa_false_positive_rate(list(ctrl.verdict) if len(ctrl) else [])
    single = [
        r.cell_id for _, r in main.iterrows() if r.verdict in TIMING and "within-run" in str(r.get("ci_method") or "")
    ]
    q = main.get("q_value", pd.Series(dtype=float))
    bh_m = int(sum(_num(x) is not None for x in q))
    alpha = 1 - t.confidence
    fragile = [
        r.cell_id for _, r in main.iterrows()
        if r.verdict in ("speedup", "slowdown") and (_num(r.get("q_value")) or 0.0) > alpha
    ]  # fmt: skip
    n_runs = int((t.plan.status != "blocked").sum()) if "status" in t.plan.columns else len(t.plan)
    return Summary(counts, len(main), n_runs, len(ctrl), aa_fp, aa_judged, single, bh_m, fragile)


def cell_label(row: pd.Series | dict[str, Any], axes: Sequence[str]) -> str:
    parts = [f"{a}={_fmt_value(row.get(a))}" for a in axes if a in row]
    return " ".join(parts) if parts else str(row.get("shape_id"))


def _fmt_value(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple, np.ndarray)):
        return "+".join(map(str, v))
    return str(v)


def fmt_speedup(row: pd.Series | dict[str, Any], ci: bool = True) -> str:
    s = _num(row.get("speedup"))
    if s is None:
        return "—"
    lo, hi = _num(row.get("ci_low")), _num(row.get("ci_high"))
    if not ci or lo is None or hi is None:
        return f"{s:.2f}×"
    return f"{s:.2f}× [{lo:.2f}, {hi:.2f}]"


def _fmt(v: Any, spec: str = ".1f", suffix: str = "") -> str:
    f = _num(v)
    return "—" if f is None else f"{f:{spec}}{suffix}"


def fmt_q(v: Any) -> str:
    q = _num(v)
    if q is None:
        return "—"
    return "<0.001" if q < 0.001 else f"{q:.3f}" if q < 0.1 else f"{q:.2f}"


_INTERVAL_SENTENCE = re.compile(r"^.*?(?:excludes|lies inside|straddles) 1 ± [0-9.]+:?\s*")


def short_reason(row: pd.Series | dict[str, Any]) -> str:
    """The reason without what the table already shows: for timing verdicts, drop the interval sentence.

    Keeps what follows it: the planning hint of an inconclusive cell, the memory price of a speedup,
    the single-repeat warning and any excluded runs.
    """
    reason = str(row.get("reason") or "").strip()
    if row.get("verdict") in TIMING:
        m = _INTERVAL_SENTENCE.match(reason)
        if m:
            return reason[m.end() :].lstrip("; ").strip()
    return reason


# PyTorch >= 2.4 allocator message (megatron-reference.md §6; older builds print "capacty"): the numbers a reader
# needs fit in one line; the full text stays in comparison.parquet and in the HTML tooltip.
_TORCH_OOM = re.compile(
    r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError: CUDA out of memory\. Tried to allocate ([\d.]+ [KMGT]i?B)\."
    r"(?: GPU (\d+) has a total capac(?:i)?ty of ([\d.]+ [KMGT]i?B) of which ([\d.]+ [KMGT]i?[B]) is free\.)?[^;]*"
)


def _compact_oom(m: re.Match[str]) -> str:
    if m.group(3):
        return f"CUDA OOM, tried to allocate {m.group(1)} (GPU {m.group(2)}: {m.group(3)} total, {m.group(4)} free)"
    return f"CUDA OOM, tried to allocate {m.group(1)}"


def display_reason(row: pd.Series | dict[str, Any]) -> str:
    """short_reason, made to fit a table cell: run ids without their shape, PyTorch's OOM text in one line."""
    text = short_reason(row)
    sid = str(row.get("shape_id") or "")
    if sid:
        text = text.replace(sid + ".", "")
    return _TORCH_OOM.sub(_compact_oom, text).strip()


def _headroom(t: SweepTables, row: pd.Series) -> float | None:
    """GPU memory left above the graph arm's peak, when the runs recorded the device's total memory."""
    col = next((c for c in ("gpu_mem_total_gb", "gpu_memory_gb", "device_mem_gb") if c in t.runs.columns), None)
    peak = _num(row.get("graph_peak_mem_gb"))
    if col is None or peak is None:
        return None
    ids = set(_ids(row.get("graph_run_ids")))
    vals = [_num(v) for v in t.runs.loc[t.runs.run_id.isin(ids), col]]
    vals = [v for v in vals if v is not None]
    return min(vals) - peak if vals else None


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%" if x * 100 >= 1 or x == 0 else f"{x * 100:.1f}%"


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _truncate(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1].rstrip() + "…"


def render_markdown(t: SweepTables, cost: Cost, s: Summary) -> str:
    conf = f"{t.confidence * 100:.0f}%"
    out = [f"## graphsweep: {t.sweep}", ""]
    if t.description:
        out += [t.description, ""]
    counts = ", ".join(f"**{n}** {v}" for v, n in s.counts.items() if n)
    out.append(f"{s.n_cells} cells ({counts}); {s.n_runs} runs; margin ±{t.margin:g}, {conf} intervals.")
    out.append("")
    axes = [a for a in t.axes if a in t.comparison.columns]
    head = [*axes, "variant", "verdict", f"speedup [{conf} CI]", "q", "eager ms", "graph ms", "Δ mem GB", "reason"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join("---:" if h in ("q", "eager ms", "graph ms", "Δ mem GB") else "---" for h in head) + "|")
    for _, r in t.comparison.iterrows():
        verdict = r.verdict if r.verdict not in ("speedup", "slowdown") else f"**{r.verdict}**"
        if _is_control(r):
            verdict += " (A/A)"
        cells = [_fmt_value(r.get(a)) for a in axes] + [
            str(r.variant), verdict, fmt_speedup(r), fmt_q(r.get("q_value")), _fmt(r.get("eager_step_ms"), ".2f"),
            _fmt(r.get("graph_step_ms"), ".2f"), _fmt(r.get("mem_delta_gb"), "+.2f"),
            _truncate(display_reason(r), 160),
        ]  # fmt: skip
        out.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
    out += ["", "**GPU-hours**: " + _cost_sentence(cost), ""]
    if cost.per_verdict_gpu_h:
        per = ", ".join(
            f"{v} {cost.per_verdict_gpu_h[v]:.2f}" for v in dict.fromkeys([*VERDICT_ORDER, *cost.per_verdict_gpu_h])
            if v in cost.per_verdict_gpu_h
        )  # fmt: skip
        out += [f"Per verdict (graph runs + the cell's share of its shape's eager runs): {per}.", ""]
    out += ["**Read with care**", ""]
    out += [f"- {c}" for c in caveats(t, s)]
    out.append("")
    return "\n".join(out)


def _cost_sentence(cost: Cost) -> str:
    parts = [f"{cost.spent_gpu_h:.2f} spent"]
    if cost.control_gpu_h:
        parts.append(f"of which {cost.control_gpu_h:.2f} on A/A control cells")
    if cost.blocked_runs:
        approx = f"≈{cost.avoided_blocked_gpu_h:.2f}"
        if cost.blocked_unestimated:
            approx += f" (+{cost.blocked_unestimated} runs without an estimate)"
        parts.append(f"{approx} avoided by {cost.blocked_runs} preflight-blocked runs")
    parts.append(f"{cost.avoided_shared_gpu_h:.2f} avoided by shared eager baselines")
    parts.append(f"the naive design (one eager run per variant, no preflight) would have cost ≈{cost.naive_gpu_h:.2f}")
    return "; ".join(parts) + "."


def caveats(t: SweepTables, s: Summary) -> list[str]:
    conf = f"{t.confidence * 100:.0f}%"
    out = [
        f"Speedup = eager step time / graph step time (>1: the graph is faster), median of each run's steady window; "
        f"`speedup`/`slowdown` only when the whole {conf} interval lies beyond 1 ± {t.margin:g} (the practical margin), "
        f"`neutral` when it lies inside, `inconclusive` when it straddles an edge (more repeats would decide).",
    ]
    if s.single_repeat_cells:
        out.append(
            f"{len(s.single_repeat_cells)} cell(s) had one usable run per arm: their interval is within-run only "
            "(bootstrap of iteration times) and understates job-to-job noise; rerun with `repeats: 3` or more to trust them."
        )
    elif any(v in TIMING for v in s.counts if s.counts[v]):
        out.append("Every timed cell's interval comes from repeated jobs (jobs are the replicates).")
    else:
        out.append("No cell has a timing verdict: both arms must complete a steady window to be compared.")
    if s.bh_m:
        frag = (
            f" {len(s.fdr_fragile)} speedup/slowdown cell(s) have q > {1 - t.confidence:.2f}: "
            "they may not survive the correction across cells." if s.fdr_fragile
            else f" Every speedup/slowdown has q ≤ {1 - t.confidence:.2f}."
        )  # fmt: skip
        out.append(
            f"q-values: Benjamini–Hochberg across the {s.bh_m} timed cells of the sweep (A/A controls excluded); "
            f"verdicts use each cell's interval.{frag}"
        )
    if s.n_control:
        rate = f"{s.aa_fp / s.aa_judged:.0%}" if s.aa_judged else "n/a"
        out.append(
            f"A/A control (eager vs eager): {s.aa_fp} of {s.aa_judged} judged control cells flagged a difference "
            f"(measured false-positive rate {rate}; expected ≤ {1 - t.confidence:.0%})."
        )
    else:
        out.append("No A/A control cells were run: the cluster's false-positive rate was not measured (`aa_control: true`).")
    out.append("Memory: peak after capture, median across runs; Δ = graph − eager.")
    return out


# --------------------------------------------------------------------------------------------
# Plots (matplotlib, Agg, inline SVG)
# --------------------------------------------------------------------------------------------

_svg_counter = iter(range(1, 1_000_000))


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

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


def _svg(fig: Any, css_class: str, label: str) -> str:
    """The figure as inline SVG: no XML prologue, no namespace URLs, ids unique within the page."""
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight", pad_inches=0.05)
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", svg)
    n = next(_svg_counter)
    svg = re.sub(r'\bid="([^"]+)"', rf'id="f{n}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#f{n}-\1)", svg)
    svg = re.sub(r'href="#([^"]+)"', rf'href="#f{n}-\1"', svg)
    # Scale with the page: keep the viewBox, drop the fixed size.
    svg = re.sub(r'<svg([^>]*?)\swidth="([\d.]+)pt"\sheight="([\d.]+)pt"', _svg_size, svg, count=1)
    return svg.replace("<svg", f'<svg class="plot {css_class}" role="img" aria-label="{html.escape(label)}"', 1)


def _svg_size(m: re.Match[str]) -> str:
    w = float(m.group(2)) * 96 / 72  # pt -> CSS px
    return f'<svg{m.group(1)} style="max-width:{w:.0f}px" width="100%"'


def speedup_bars_svg(t: SweepTables) -> str:
    """One panel per variant: speedup with its interval per cell (sweeps with fewer than two axes)."""
    plt = _plt()
    c = t.comparison[t.comparison.variant != CONTROL_VARIANT]
    variants = list(dict.fromkeys(c.variant))
    if not variants:
        return ""
    rows_max = max(int((c.variant == v).sum()) for v in variants)
    ncol = min(len(variants), 3)
    nrow = math.ceil(len(variants) / ncol)
    fig, axs = plt.subplots(
        nrow, ncol, figsize=(4.3 * ncol, 0.6 + nrow * (0.5 + 0.24 * rows_max)), squeeze=False, sharex=True
    )
    vals = [x for x in pd.concat([c.ci_low, c.ci_high, c.speedup]).map(_num) if x is not None] or [1.0]
    lo_x, hi_x = min(min(vals), 1 - 2 * t.margin) * 0.95, max(max(vals), 1 + 2 * t.margin) * 1.05
    for ax, variant in zip(axs.flat, variants):
        sub = c[c.variant == variant]
        y = np.arange(len(sub))[::-1]
        ax.axvspan(1 - t.margin, 1 + t.margin, color="#d0d7de", alpha=0.45, lw=0)
        ax.axvline(1.0, color="#57606a", lw=0.8)
        for yi, (_, r) in zip(y, sub.iterrows()):
            col = VERDICT_COLORS.get(r.verdict, "#24292f")
            s, lo, hi = _num(r.speedup), _num(r.ci_low), _num(r.ci_high)
            if s is None:
                ax.text(1.0, yi, f" {r.verdict}", va="center", ha="center", fontsize=7.5, color=col, fontweight="bold")
                continue
            ax.barh(yi, s - 1.0, left=1.0, height=0.6, color=col, alpha=0.85)
            if lo is not None and hi is not None:
                ax.errorbar(s, yi, xerr=[[s - lo], [hi - s]], fmt="none", ecolor="#24292f", elinewidth=1, capsize=2)
        ax.set_yticks(y, [cell_label(r, t.axes) for _, r in sub.iterrows()])
        ax.set_title(variant, loc="left", fontweight="bold")
        ax.set_xlim(lo_x, hi_x)
        ax.set_xlabel("speedup (eager / graph), bar = median, whisker = interval")
    for ax in list(axs.flat)[len(variants) :]:
        ax.axis("off")
    fig.tight_layout()
    return _svg(fig, "speedup-bars", "speedup per cell and variant")


def _heat_color(s: float | None, verdict: str, margin: float) -> tuple[str, str]:
    """(background, text colour) of a heatmap cell: green for faster, red for slower, by log ratio.

    A decided speedup/slowdown is always clearly coloured; neutral and inconclusive cells stay pale,
    so the colour never claims more than the verdict.
    """
    if s is None:
        return VERDICT_COLORS.get(verdict, "#24292f"), "#ffffff"
    x = min(1.0, abs(math.log(s)) / math.log(1.5)) ** 0.7  # saturates at 1.5x either way
    a = 0.45 + 0.55 * x if verdict in ("speedup", "slowdown") else 0.22 * x
    base = (26, 127, 55) if s >= 1 else (207, 34, 46)
    r, g, b = (round(255 + (c - 255) * a) for c in base)
    return f"#{r:02x}{g:02x}{b:02x}", "#ffffff" if a > 0.5 else "#1f2328"


def heatmaps_html(t: SweepTables, varying: list[str]) -> str:
    """Speedup over the first two varying axes, one grid per variant (and per value of any further axis)."""
    c = t.comparison[t.comparison.variant != CONTROL_VARIANT]
    ya, xa = varying[0], varying[1]
    rest = varying[2:]
    xs = list(dict.fromkeys(c[xa].map(_key)))
    ys = list(dict.fromkeys(c[ya].map(_key)))
    blocks = []
    for variant in dict.fromkeys(c.variant):
        sub = c[c.variant == variant]
        groups = sub.groupby([sub[a].map(_key) for a in rest], sort=False) if rest else [((), sub)]
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            title = html.escape(str(variant))
            facet = ", ".join(f"{a}={k}" for a, k in zip(rest, key))
            by = {(_key(r[ya]), _key(r[xa])): r for _, r in g.iterrows()}
            head = "".join(f"<th>{html.escape(x)}</th>" for x in xs)
            body = []
            for yv in ys:
                tds = []
                for xv in xs:
                    r = by.get((yv, xv))
                    if r is None:
                        tds.append('<td class="hm-empty">·</td>')
                        continue
                    s = _num(r.speedup)
                    bg, fg = _heat_color(s, r.verdict, t.margin)
                    main = f"{s:.2f}×" if s is not None else html.escape(r.verdict)
                    lo, hi = _num(r.get("ci_low")), _num(r.get("ci_high"))
                    ci = f"[{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
                    sub_txt = html.escape(r.verdict) if s is not None else ""
                    ring = ""
                    if r.verdict in ("neutral", "inconclusive"):  # undecided: a ring in the verdict colour
                        ring = f";box-shadow:inset 0 0 0 2px {VERDICT_COLORS[r.verdict]}"
                    tds.append(
                        f'<td class="hm v-{html.escape(r.verdict)}" style="background:{bg};color:{fg}{ring}" title="{html.escape(str(r.reason or ""))}">'
                        f'<a href="#{_anchor(r.cell_id)}" style="color:{fg}"><b>{main}</b>'
                        f'<span class="hm-ci">{ci}</span><span class="hm-v">{sub_txt}</span></a></td>'
                    )
                body.append(f'<tr><th class="hm-y">{html.escape(yv)}</th>{"".join(tds)}</tr>')
            blocks.append(
                f'<div class="hm-block"><div class="hm-title">{title}'
                + (f' <span class="muted">{html.escape(facet)}</span>' if facet else "")
                + f'</div><table class="heatmap"><thead><tr><th class="hm-corner">{html.escape(ya)} \\ {html.escape(xa)}</th>'
                f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
            )
    return f'<div class="hm-wrap">{"".join(blocks)}</div>'


def _key(v: Any) -> str:
    return _fmt_value(v)


def _anchor(cell_id: Any) -> str:
    return "cell-" + re.sub(r"[^A-Za-z0-9_.-]", "_", str(cell_id))


def memory_svg(t: SweepTables, cap: int = MEMORY_CAP) -> tuple[str, int, int]:
    """Peak memory after capture, eager vs graph, one pair of bars per cell; (svg, cells drawn, cells with data)."""
    plt = _plt()
    c = t.comparison[t.comparison.variant != CONTROL_VARIANT]
    rows = [
        r for _, r in c.iterrows()
        if _num(r.get("eager_peak_mem_gb")) is not None or _num(r.get("graph_peak_mem_gb")) is not None
    ]  # fmt: skip
    n_data = len(rows)
    rows = rows[:cap]
    if not rows:
        return "", 0, 0
    n = len(rows)
    fig, ax = plt.subplots(figsize=(9.5, 0.55 + 0.3 * n))
    y = np.arange(n)[::-1]
    e = [_num(r.get("eager_peak_mem_gb")) for r in rows]
    g = [_num(r.get("graph_peak_mem_gb")) for r in rows]
    top = max([v for v in e + g if v is not None] or [1.0])
    ax.barh(y + 0.19, [v or 0 for v in e], height=0.36, color=EAGER_COLOR, label="eager")
    ax.barh(y - 0.19, [v or 0 for v in g], height=0.36, color=GRAPH_COLOR, label="graph")
    for yi, r, ev, gv in zip(y, rows, e, g):
        if gv is None:
            note = "graph: " + ("OOM" if r.verdict == "oom" else r.verdict)
            color = VERDICT_COLORS.get(r.verdict, "#24292f")
            ax.text(top * 0.01, yi - 0.19, note, va="center", fontsize=7.5, color=color, fontweight="bold")
        d = _num(r.get("mem_delta_gb"))
        if d is not None and ev:
            label = f"{d:+.2f} GB ({d / ev:+.0%})"
            ax.text(max(ev, gv or 0) + top * 0.01, yi, label, va="center", fontsize=7.5, color="#57606a")
    ax.set_yticks(y, [f"{cell_label(r, t.axes)} · {r.variant}" for r in rows])
    ax.set_xlim(0, top * 1.22)
    ax.set_xlabel("peak memory after capture (GB)")
    fig.tight_layout()
    return _svg(fig, "memory-bars", "peak memory eager vs graph per cell"), len(rows), n_data


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
    for arm, ids in (("eager", _ids(row.get("eager_run_ids"))), ("graph", _ids(row.get("graph_run_ids")))):
        for rid in ids:
            it = by_run.get(rid)
            if it is None or not len(it):
                continue
            r = runs.loc[rid] if rid in runs.index else {}
            p = plan.loc[rid] if rid in plan.index else {}
            # paired arms are not plan rows (their job is): the runs table carries the same warmup
            warm = _num(p.get("warmup")) if len(p) else (_num(r.get("warmup")) if len(r) else None)
            first, last = _num(r.get("steady_first")) if len(r) else None, _num(r.get("steady_last")) if len(r) else None
            cap = _num(r.get("capture_iteration")) if len(r) else None
            failed = _num(r.get("failed_iteration")) if len(r) and r.get("outcome") not in ("completed", "timeout") else None
            if cap is None and arm == "graph" and warm is not None and not _is_control(row):
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


def traces_svg(t: SweepTables, cap: int = TRACE_CAP) -> tuple[str, int, int]:
    """Iteration time of every run of both arms per cell (thin lines); (svg, cells drawn, cells with data)."""
    plt = _plt()
    from matplotlib.ticker import MaxNLocator

    it = t.iterations.dropna(subset=["elapsed_ms"])
    by_run = {k: g.sort_values("iteration") for k, g in it.groupby("run_id")} if len(it) else {}
    runs = t.runs.set_index("run_id", drop=False) if len(t.runs) else t.runs
    plan = t.plan.set_index("run_id", drop=False)
    order = sorted(t.comparison.index, key=lambda i: (_is_control(t.comparison.loc[i]), i))
    drawn: list[tuple[pd.Series, list[_Trace]]] = []
    eager_only: dict[str, tuple[pd.Series, list[_Trace]]] = {}
    with_graph: set[str] = set()
    for i in order:
        row = t.comparison.loc[i]
        tr = _traces_for(t, row, by_run, runs, plan)
        if any(x.arm == "graph" for x in tr):
            drawn.append((row, tr))
            with_graph.add(row.shape_id)
        elif tr:  # only the shared eager baseline has data: show it once per shape, not once per variant
            eager_only.setdefault(row.shape_id, (row, tr))
    cells = drawn + [v for k, v in eager_only.items() if k not in with_graph]
    n_data = len(cells)
    cells = cells[:cap]
    if not cells:
        return "", 0, 0
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
            col = EAGER_COLOR if tr.arm == "eager" else GRAPH_COLOR
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
        for k, arm in enumerate(("eager", "graph")):
            wins = [tr.steady for tr in trs if tr.arm == arm and tr.steady]
            if wins:
                a, b = min(w[0] for w in wins), max(w[1] for w in wins)
                col = EAGER_COLOR if arm == "eager" else GRAPH_COLOR
                ax.plot([a, b], [0.03 + 0.05 * k] * 2, transform=ax.get_xaxis_transform(), color=col, lw=3,
                        solid_capstyle="butt", alpha=0.7)  # fmt: skip
        ax.set_ylim(0, top * 1.04)
        verdict = str(row.verdict)
        ax.set_title(f"{cell_label(row, t.axes)} · {row.variant}", loc="left", fontsize=8, pad=12)
        ax.text(0.0, 1.01, f"{verdict}  {fmt_speedup(row, ci=False) if _num(row.get('speedup')) else ''}",
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
    return _svg(fig, "traces", "iteration time per run, eager and graph arms"), len(cells), n_data


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#ffffff;--soft:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue","DejaVu Sans",Arial,sans-serif}
main{max-width:1360px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 0 2px;font-weight:650;letter-spacing:-.01em}
h2{font-size:15px;margin:26px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line);font-weight:650}
.sub{color:var(--muted);margin:0 0 12px}
.muted{color:var(--muted);font-weight:400}
.num,td.num{font-variant-numeric:tabular-nums;text-align:right;white-space:nowrap}
.badges{display:flex;flex-wrap:wrap;gap:6px;margin:10px 0 14px}
.badge{display:inline-block;border-radius:999px;padding:1px 9px;color:#fff;font-weight:600;font-size:12px;white-space:nowrap}
.badge.big{font-size:13px;padding:3px 12px}
.badge.zero{opacity:.28}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(180px,1fr));gap:10px;margin:6px 0 8px}
.card{border:1px solid var(--line);border-radius:8px;padding:8px 12px;background:var(--soft)}
.card .k{font-size:11.5px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.card .v{font-size:20px;font-weight:650;font-variant-numeric:tabular-nums}
.card .d{font-size:11.5px;color:var(--muted)}
.caveats{margin:8px 0 0;padding:7px 12px 7px 28px;background:#fffbea;border:1px solid #f0e2a8;border-left:4px solid #d4a72c;border-radius:6px;font-size:12.5px}
.caveats li{margin:2px 0}
table.cells,table.costs{border-collapse:collapse;width:100%;font-size:12.5px}
table.cells th,table.costs th{position:sticky;top:0;background:var(--soft);text-align:left;font-weight:600;color:var(--muted);font-size:11.5px;border-bottom:1px solid var(--line);padding:5px 6px;vertical-align:bottom;line-height:1.25}
table.cells td,table.costs td{border-bottom:1px solid #eaeef2;padding:4px 6px;vertical-align:top}
table.cells tr:hover td{background:#f6f8fa}
table.cells td.reason{color:var(--fg);min-width:260px;font-size:12px;overflow-wrap:anywhere}
table.cells td.logs{white-space:nowrap}
table.cells td.logs a{margin-right:4px}
table.cells tr.shape-start td{border-top:1.5px solid var(--line)}
.ci{color:var(--muted)}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
.hm-wrap{display:flex;flex-wrap:wrap;gap:18px}
.hm-title{font-weight:650;margin:0 0 4px}
table.heatmap{border-collapse:separate;border-spacing:3px;font-size:12px}
table.heatmap th{font-weight:600;color:var(--muted);padding:2px 6px;text-align:center}
table.heatmap th.hm-y{text-align:right}
table.heatmap th.hm-corner{font-weight:400;font-size:11px;text-align:right}
td.hm{min-width:92px;text-align:center;border-radius:6px;padding:5px 6px;line-height:1.2}
td.hm a{display:block;text-decoration:none}
td.hm b{font-size:14px;font-variant-numeric:tabular-nums}
td.hm .hm-ci{display:block;font-size:10.5px;opacity:.9;font-variant-numeric:tabular-nums}
td.hm .hm-v{display:block;font-size:10.5px;font-weight:600}
td.hm-empty{color:#d0d7de;text-align:center}
svg.plot{display:block;height:auto;margin:4px 0}
.legend{font-size:12px;color:var(--muted);margin:2px 0 4px}
.legend i{display:inline-block;width:16px;height:3px;vertical-align:middle;margin:0 4px 0 10px}
.note{color:var(--muted);font-size:12px}
footer{margin-top:30px;color:var(--muted);font-size:11.5px}
"""


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
    conf = f"{t.confidence * 100:.0f}%"
    axes = [a for a in t.axes if a in t.comparison.columns]
    logs = _relative_log_paths(t, out_dir)
    show_headroom = any(_headroom(t, r) is not None for _, r in t.comparison.iterrows())
    head = "".join(f"<th>{html.escape(a)}</th>" for a in axes) + (
        f"<th>variant</th><th>verdict</th><th class='num'>speedup [{conf} CI]</th><th class='num'>q</th>"
        "<th class='num'>step ms<br>eager → graph</th><th class='num'>runs<br>e+g</th>"
        "<th class='num'>peak GB<br>eager → graph</th><th class='num'>Δ GB</th>"
        + ("<th class='num' title='GPU memory left above the graph arm's peak'>headroom GB</th>" if show_headroom else "")
        + "<th>reason</th><th>logs</th>"
    )
    rows = []
    prev_shape = None
    for _, r in t.comparison.iterrows():
        speed = fmt_speedup(r, ci=False)
        speed_html = f"<b>{speed}</b>" if _num(r.get("speedup")) is not None else '<span class="muted">—</span>'
        lo, hi = _num(r.get("ci_low")), _num(r.get("ci_high"))
        has_ci = lo is not None and hi is not None and _num(r.get("speedup")) is not None
        ci = f' <span class="ci">[{lo:.2f}, {hi:.2f}]</span>' if has_ci else ""
        steps = _pair(r.get("eager_step_ms"), r.get("graph_step_ms"))
        mems = _pair(r.get("eager_peak_mem_gb"), r.get("graph_peak_mem_gb"))
        n_e, n_g = _num(r.get("n_eager")), _num(r.get("n_graph"))
        n = f"{int(n_e or 0)}+{int(n_g or 0)}" if r.verdict != "blocked" else "—"
        if r.verdict in TIMING and "within-run" in str(r.get("ci_method") or ""):
            n += ' <span title="one run per arm: within-run interval only">¹</span>'
        reason = display_reason(r)
        if _is_control(r) and r.verdict in TIMING:
            aa_note = "A/A control: eager vs eager, any speedup/slowdown is a false positive"
            reason = f"{reason}; {aa_note}" if reason else aa_note
        e_links = _log_links(t, _ids(r.get("eager_run_ids")), "e", out_dir, logs)
        g_links = _log_links(t, _ids(r.get("graph_run_ids")), "a" if _is_control(r) else "g", out_dir, logs)
        links = "<br>".join(x for x in (e_links, g_links) if x)
        verdict = _badge(str(r.verdict)) + (' <span class="muted">A/A</span>' if _is_control(r) else "")
        cls = ' class="shape-start"' if prev_shape is not None and r.shape_id != prev_shape else ""
        prev_shape = r.shape_id
        tds = "".join(f"<td>{html.escape(_fmt_value(r.get(a)))}</td>" for a in axes)
        rows.append(
            f'<tr id="{_anchor(r.cell_id)}"{cls} data-verdict="{html.escape(str(r.verdict))}" title="{html.escape(str(r.cell_id))}">{tds}'
            f"<td>{html.escape(str(r.variant))}</td><td>{verdict}</td>"
            f'<td class="num">{speed_html}{ci}</td><td class="num">{fmt_q(r.get("q_value"))}</td>'
            f'<td class="num">{steps}</td><td class="num">{n}</td>'
            f'<td class="num">{mems}</td><td class="num">{_fmt(r.get("mem_delta_gb"), "+.2f")}</td>'
            + (f'<td class="num">{_fmt(_headroom(t, r), ".1f")}</td>' if show_headroom else "")
            + f'<td class="reason" title="{html.escape(str(r.get("reason") or ""))}">{html.escape(reason)}</td><td class="logs">{links.strip() or "—"}</td></tr>'
        )
    return f'<table class="cells"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _pair(eager: Any, graph: Any) -> str:
    e, g = _num(eager), _num(graph)
    if e is None and g is None:
        return "—"
    return f"{_fmt(e, '.2f')} → {_fmt(g, '.2f')}"


def costs_table_html(cost: Cost) -> str:
    rows = []
    for v in [*VERDICT_ORDER, *[k for k in cost.per_verdict_gpu_h if k not in VERDICT_ORDER]]:
        if v not in cost.per_verdict_gpu_h and v not in cost.per_verdict_cells:
            continue
        h = cost.per_verdict_gpu_h.get(v, 0.0)
        share = h / cost.spent_gpu_h if cost.spent_gpu_h else 0.0
        rows.append(
            f"<tr><td>{_badge(v)}</td><td class='num'>{cost.per_verdict_cells.get(v, 0)}</td>"
            f"<td class='num'>{h:.2f}</td><td class='num'>{_pct(share)}</td></tr>"
        )
    if cost.control_gpu_h:
        rows.append(f"<tr><td>A/A control</td><td></td><td class='num'>{cost.control_gpu_h:.2f}</td>"
                    f"<td class='num'>{_pct(cost.control_gpu_h / cost.spent_gpu_h if cost.spent_gpu_h else 0)}</td></tr>")  # fmt: skip
    if cost.unattributed_gpu_h:
        rows.append(f"<tr><td>runs of no cell</td><td></td><td class='num'>{cost.unattributed_gpu_h:.2f}</td><td></td></tr>")
    rows.append(f"<tr><td><b>total</b></td><td></td><td class='num'><b>{cost.spent_gpu_h:.2f}</b></td><td class='num'>100%</td></tr>")
    return (
        "<table class='costs' style='width:auto;min-width:420px'><thead><tr><th>verdict</th><th class='num'>cells</th>"
        f"<th class='num'>GPU-hours</th><th class='num'>share</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def render_html(t: SweepTables, cost: Cost, s: Summary, out_dir: Path) -> str:
    conf = f"{t.confidence * 100:.0f}%"
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    badges = "".join(_badge(v, f"{s.counts.get(v, 0)} {v}", big=True, zero=not s.counts.get(v)) for v in VERDICT_ORDER)
    badges += "".join(_badge(v, f"{n} {v}", big=True) for v, n in s.counts.items() if v not in VERDICT_ORDER)

    if s.n_control:
        rate = f"{s.aa_fp / s.aa_judged:.0%}" if s.aa_judged else "n/a"
        aa_card = (f'<div class="card aa"><div class="k">A/A false-positive rate</div><div class="v">{rate}</div>'
                   f'<div class="d">{s.aa_fp} of {s.aa_judged} eager-vs-eager cells flagged; expected ≤ {1 - t.confidence:.0%}</div></div>')  # fmt: skip
    else:
        aa_card = ('<div class="card aa"><div class="k">A/A false-positive rate</div><div class="v">—</div>'
                   '<div class="d">no A/A control cells were run (aa_control: true)</div></div>')  # fmt: skip
    blocked_d = f"{cost.blocked_runs} preflight-blocked runs, estimated" if cost.blocked_runs else "no run was blocked"
    if cost.blocked_unestimated:
        blocked_d += f"; {cost.blocked_unestimated} without estimate"
    cards = (
        f'<div class="card"><div class="k">GPU-hours spent</div><div class="v">{cost.spent_gpu_h:.2f}</div>'
        f'<div class="d">{s.n_runs} runs, setup and capture included</div></div>'
        f'<div class="card"><div class="k">avoided by preflight</div><div class="v">≈{cost.avoided_blocked_gpu_h:.2f}</div>'
        f'<div class="d">{blocked_d}</div></div>'
        f'<div class="card"><div class="k">avoided by shared baselines</div><div class="v">{cost.avoided_shared_gpu_h:.2f}</div>'
        f'<div class="d">vs one eager run per variant (naive ≈{cost.naive_gpu_h:.2f})</div></div>'
        + aa_card
    )

    varying = [a for a in t.axes if a in t.comparison.columns and t.comparison[a].map(_key).nunique() > 1]
    if len(varying) >= 2:
        speed_block = (
            f"<h2>Speedup by {html.escape(varying[0])} × {html.escape(varying[1])}</h2>"
            '<p class="note">eager / graph step time; green = graph faster, red = slower, pale = within the margin or undecided; '
            "a cell links to its row.</p>" + heatmaps_html(t, varying)
        )
    else:
        svg = speedup_bars_svg(t)
        speed_block = (
            "<h2>Speedup per cell</h2>"
            f'<p class="note">bar = speedup (eager / graph), whisker = {conf} interval, grey band = 1 ± {t.margin:g}.</p>' + svg
            if svg else ""
        )  # fmt: skip

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
    cav = "".join(f"<li>{_md_inline(c)}</li>" for c in caveats(t, s))
    desc = f" · {html.escape(t.description)}" if t.description else ""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>graphsweep · {html.escape(t.sweep)}</title><style>{_CSS}</style></head><body><main>",
        f"<h1>graphsweep · {html.escape(t.sweep)}</h1>",
        f'<p class="sub">{s.n_cells} cells · {s.n_runs} runs · margin ±{t.margin:g} · {conf} intervals{desc}</p>',
        f'<div class="badges" id="verdict-counts">{badges}</div>',
        f'<div class="cards">{cards}</div>',
        f'<ul class="caveats">{cav}</ul>',
        speed_block,
        f"<h2>Cells <span class='muted'>({len(t.comparison)})</span></h2>",
        cells_table_html(t, out_dir),
        '<p class="note">q: Benjamini–Hochberg across the sweep. ¹ one run per arm: within-run interval. '
        "Logs: e = eager runs, g = graph runs, a = A/A control runs (links relative to this file).</p>",
        "<h2>GPU-hours per verdict</h2>",
        costs_table_html(cost),
        '<p class="note">A cell is charged its graph runs plus an equal share of its shape\'s eager runs. '
        "GPU-seconds = GPUs × wall time of the job.</p>",
    ]
    if mem:
        parts += [
            "<h2>Peak memory after capture</h2>",
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


def _md_inline(text: str) -> str:
    """Escape, then render `code` spans of a caveat."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


# --------------------------------------------------------------------------------------------
# Entry point (rule report)
# --------------------------------------------------------------------------------------------


def write_reports(plan: Path, runs: Path, iterations: Path, comparison: Path, md_out: Path, html_out: Path) -> None:
    """Write report.md and report.html for one sweep from its four tables."""
    t = load_tables(Path(plan), Path(runs), Path(iterations), Path(comparison))
    cost = cost_accounting(t)
    s = summarize(t)
    md_out, html_out = Path(md_out), Path(html_out)
    for out, text in ((md_out, render_markdown(t, cost, s)), (html_out, render_html(t, cost, s, html_out.parent))):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
