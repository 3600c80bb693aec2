"""The report's numbers: the four tables of a sweep, loaded once, with the cost accounting and the verdict counts.

The report reads only plan, runs, iterations and comparison, so it can be rebuilt from archived Parquet files.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from graphsweep.judge import interval as iv
from graphsweep.judge import parity as lp
from graphsweep.parse.signatures import LAUNCH_GATE_CLASS
from graphsweep.judge import verdict as stats
from graphsweep.store.tables import PLAN_COLUMNS, read_table
from graphsweep.vocab import (
    AA, BLOCKED, EAGER, INVALID, NOT_COMPARABLE, SLOWDOWN, SPEEDUP, TIMING_VERDICTS, VERDICTS, cell_counts,
)

# Verdicts are counted and listed in vocabulary order (results first); not-comparable only when a cell has it
VERDICT_ORDER = tuple(v for v in VERDICTS if v != NOT_COMPARABLE)
GATE_CLASS = LAUNCH_GATE_CLASS  # a graph run the launch gate skipped


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
    continue_command: str = ""  # the one command that continues the sweep (comparison metadata, the decision loop)
    loop_end: str | None = None  # why the decision loop ended (vocab LOOP_ENDS; None: no loop ran)


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
    if "look" in p.columns:  # the runs the sweep asked for: its first look's, and those its loop added (that ran)
        ran = set(r.run_id) | (set(r.pair_id.dropna()) if "pair_id" in r.columns else set())
        p = p[(p["look"] <= 1) | p.run_id.isin(ran)].reset_index(drop=True)
    axes = [col for col in p.columns if col not in PLAN_COLUMNS]
    cx = _extra(Path(comparison))
    spec = _extra(Path(plan)).get("spec", {}) or {}
    margin = cx.get("margin")
    if margin is None:  # a comparison table without its metadata: the cells' own margin, else the spec's
        margin = _first_valid(c.get("margin"), spec.get("margin"))
    # the level of the intervals: 1 - alpha of the cells (0.025 in an adaptive sweep); tables before version 3
    # were judged at 0.05
    alpha = _first_valid(c.get("alpha"), iv.ALPHA)
    sweep = _first_valid(c.get("sweep"), None) or _first_valid(p.get("sweep"), None) or spec.get("sweep") or "sweep"
    return SweepTables(
        plan=p, runs=r, iterations=it, comparison=c.reset_index(drop=True), axes=axes, margin=float(margin),
        confidence=1 - float(alpha), sweep=str(sweep), description=str(spec.get("description") or ""),
        continue_command=str(cx.get("continue_command") or ""),
        loop_end=cx.get("loop_end") if isinstance(cx.get("loop_end"), str) else None,
    )  # fmt: skip


def _first_valid(series: pd.Series | None, default: Any) -> Any:
    if series is None:
        return default
    s = series.dropna()
    return s.iloc[0] if len(s) else default


def as_number(value: Any) -> float | None:
    """A finite float, or None for missing values (None, NaN, pd.NA, non-numbers)."""
    if value is None or isinstance(value, (list, tuple, np.ndarray, dict)):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def flag(value: Any) -> bool:
    """A boolean column's value: True only when set and true (a missing value, NaN included, is False)."""
    return bool(as_number(value))


def id_list(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    return [str(v) for v in list(value)]


def is_control(row: pd.Series | dict[str, Any]) -> bool:
    return row.get("variant") == AA


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
    naive_gpu_h: float  # spent + the avoided figures (control cells excluded from the naive design)
    gated_runs: int = 0  # graph runs the launch gate skipped (spec launch_gate), at their estimated cost below
    avoided_gate_gpu_h: float = 0.0
    per_verdict_cells: dict[str, int] = field(default_factory=dict)
    estimated_gpu_h: float = 0.0  # the plan's estimate (plan.parquet est_gpu_seconds) of the runs that spent GPU time
    estimated_runs: int = 0  # those runs (a pair job once): the ones with an estimate and a cost


def _run_cost(runs: pd.DataFrame) -> dict[str, float]:
    if "gpu_seconds" not in runs.columns or not len(runs):
        return {}
    return {str(k): float(v) for k, v in zip(runs.run_id, runs.gpu_seconds) if as_number(v) is not None}


def _blocked_estimate(t: SweepTables, row: pd.Series, cost: dict[str, float]) -> float | None:
    """Estimated GPU-seconds of a blocked run: the planner's estimate, else what the shape's runs cost."""
    est = as_number(row.get("est_gpu_seconds"))
    if est:  # the plan writes 0.0 for blocked runs; only a positive figure is an estimate
        return est
    same = [cost[r] for r in t.plan.run_id[t.plan.shape_id == row.shape_id] if r in cost]
    if same:
        return float(np.median(same))
    gpus = as_number(row.get("gpus")) or 1.0
    per_gpu = [
        cost[r] / (as_number(g) or 1.0) for r, g in zip(t.plan.run_id, t.plan.get("gpus", [1] * len(t.plan))) if r in cost
    ]
    return float(np.median(per_gpu)) * gpus if per_gpu else None


def _estimated(t: SweepTables, cost: dict[str, float]) -> tuple[float, int]:
    """(GPU-seconds the plan estimated for the runs that spent some, how many): the report's estimate vs actual. A
    pair job's two arms are one planned run."""
    ran = {r for r, c in cost.items() if c > 0}
    if "pair_id" in t.runs.columns:
        ran |= {str(j) for r, j in zip(t.runs.run_id, t.runs.pair_id) if r in ran and isinstance(j, str)}
    if "est_gpu_seconds" not in t.plan.columns:
        return 0.0, 0
    est = [as_number(e) for r, e in zip(t.plan.run_id, t.plan.est_gpu_seconds) if r in ran]
    est = [e for e in est if e]
    return float(sum(est)), len(est)


def cost_accounting(t: SweepTables) -> Cost:
    cost = _run_cost(t.runs)
    spent = sum(cost.values())
    # an eager run is shared by the cells that reference it (all variants of a shape; one cell when paired)
    eager_users: dict[str, int] = {}
    for _, c in t.comparison.iterrows():
        for r in id_list(c.get("eager_run_ids")):
            eager_users[r] = eager_users.get(r, 0) + 1
    per_verdict: dict[str, float] = {}
    per_cells: dict[str, int] = {}
    control = 0.0
    attributed: set[str] = set()
    for _, c in t.comparison.iterrows():
        eager_ids, graph_ids = id_list(c.get("eager_run_ids")), id_list(c.get("graph_run_ids"))
        attributed.update(eager_ids)
        attributed.update(graph_ids)
        secs = sum(cost.get(r, 0.0) for r in graph_ids)
        secs += sum(cost.get(r, 0.0) / eager_users[r] for r in eager_ids)
        if is_control(c):
            control += secs
        else:
            per_verdict[c.verdict] = per_verdict.get(c.verdict, 0.0) + secs
            per_cells[c.verdict] = per_cells.get(c.verdict, 0) + 1
    unattributed = sum(v for k, v in cost.items() if k not in attributed)

    blocked = t.plan[t.plan.status == BLOCKED] if "status" in t.plan.columns else t.plan.iloc[:0]
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
    eager = t.plan[t.plan.arm == EAGER]
    preflight_blocked = set(blocked.run_id)
    for sid, rows in eager.groupby("shape_id"):
        cells = t.comparison[(t.comparison.shape_id == sid) & (t.comparison.variant != AA)]
        k = sum(not set(id_list(ids)) <= preflight_blocked for ids in cells.graph_run_ids)
        e_secs = sum(cost.get(r, 0.0) for r in rows.run_id)
        avoided_shared += max(0, k - 1) * e_secs
    gated = t.runs[t.runs.error_class == GATE_CLASS] if "error_class" in t.runs.columns else t.runs.iloc[:0]
    avoided_gate = sum(_blocked_estimate(t, row, cost) or 0.0 for _, row in
                       t.plan[t.plan.run_id.isin(set(gated.run_id))].iterrows())
    h = 1 / 3600.0
    estimated, estimated_runs = _estimated(t, cost)
    return Cost(
        spent_gpu_h=spent * h,
        per_verdict_gpu_h={k: v * h for k, v in per_verdict.items()},
        control_gpu_h=control * h,
        unattributed_gpu_h=unattributed * h,
        avoided_blocked_gpu_h=avoided_blocked * h,
        blocked_runs=len(blocked),
        blocked_unestimated=unestimated,
        avoided_shared_gpu_h=avoided_shared * h,
        naive_gpu_h=(spent - control) * h + avoided_shared * h + avoided_blocked * h + avoided_gate * h,
        per_verdict_cells=per_cells,
        gated_runs=len(gated),
        avoided_gate_gpu_h=avoided_gate * h,
        estimated_gpu_h=estimated * h,
        estimated_runs=estimated_runs,
    )


@dataclass
class Summary:
    counts: dict[str, int]  # verdict -> cells (control cells excluded)
    n_cells: int
    n_runs: int
    n_control: int
    aa_fp: int
    aa_judged: int
    thin_cells: list[str]  # timed cells with an arm of fewer than MIN_OWN_JOBS jobs (spread allowance, not measured)
    resolution_limited_cells: list[str]  # inconclusive cells that no number of repeats decides at this print step
    bh_m: int  # cells in the Benjamini-Hochberg family
    fdr_fragile: list[str]  # speedup/slowdown cells whose q-value reaches alpha
    parity: dict[str, int] = field(default_factory=dict)  # loss parity state -> graph cells (A/A excluded)
    parity_worst: float | None = None  # largest persistent loss excess / band among cells that passed
    aa_parity: dict[str, int] = field(default_factory=dict)  # loss parity state -> A/A control cells
    gated: list[str] = field(default_factory=list)  # cells the family gate (BH q >= alpha) made inconclusive
    wide_parity: str = ""  # shapes whose eager runs' own spread widens the parity band beyond twice the floor


def summarize(t: SweepTables) -> Summary:
    c = t.comparison
    main = c[c.variant != AA] if len(c) else c
    ctrl = c[c.variant == AA] if len(c) else c
    counts, _ = cell_counts(list(c.verdict), list(c.variant)) if len(c) else ({}, 0)  # as the end-of-sweep line
    aa_fp, aa_judged, _ = stats.aa_false_positive_rate(list(ctrl.verdict) if len(ctrl) else [])
    timed = main[main.verdict.isin(TIMING_VERDICTS)] if len(main) else main
    thin = [r.cell_id for _, r in timed.iterrows() if flag(r.get("thin"))]
    limited = [r.cell_id for _, r in timed.iterrows() if flag(r.get("resolution_limited"))]
    judged = main[main.verdict.isin((*TIMING_VERDICTS, INVALID))] if len(main) else main  # cells a loss decides
    states = judged["loss_parity"].dropna() if "loss_parity" in judged.columns else pd.Series(dtype=str)
    ok = judged[judged["loss_parity"] == lp.PARITY_OK] if "loss_parity" in judged.columns else main.iloc[:0]
    worst = [as_number(x) for x in ok.get("loss_worst_excess", [])]
    worst = [x for x in worst if x is not None]
    q = main.get("q_value", pd.Series(dtype=float))
    bh_m = int(sum(as_number(x) is not None for x in q))
    alpha = 1 - t.confidence
    fragile = [
        r.cell_id for _, r in main.iterrows()
        if r.verdict in (SPEEDUP, SLOWDOWN) and (as_number(r.get("q_value")) or 0.0) >= alpha
    ]  # fmt: skip
    n_runs = int((t.plan.status != BLOCKED).sum()) if "status" in t.plan.columns else len(t.plan)
    aa_states = ctrl["loss_parity"].dropna() if "loss_parity" in ctrl.columns else pd.Series(dtype=str)
    gated = [r.cell_id for _, r in main.iterrows() if flag(r.get("family_gated"))]
    wide = {}
    for _, r in main.iterrows():
        tol = as_number(r.get("loss_band_max"))
        if tol is not None and tol > 2 * lp.LOSS_FLOOR:
            wide[str(r.shape_id)] = max(wide.get(str(r.shape_id), 0.0), tol)
    wide_text = "; ".join(f"shape {sid}: band up to ±{tol:.0%} where its eager runs part" for sid, tol in wide.items())
    return Summary(counts, len(main), n_runs, len(ctrl), aa_fp, aa_judged, thin, limited, bh_m, fragile,
                   {k: int(v) for k, v in states.value_counts().items()}, max(worst) if worst else None,
                   {k: int(v) for k, v in aa_states.value_counts().items()}, gated, wide_text)


def headroom(t: SweepTables, row: pd.Series) -> float | None:
    """GPU memory left above the graph arm's peak, when the runs recorded the device's total memory."""
    col = next((c for c in ("gpu_mem_total_gb", "gpu_memory_gb", "device_mem_gb") if c in t.runs.columns), None)
    peak = as_number(row.get("graph_mem_gb"))
    if col is None or peak is None:
        return None
    ids = set(id_list(row.get("graph_run_ids")))
    vals = [as_number(v) for v in t.runs.loc[t.runs.run_id.isin(ids), col]]
    vals = [v for v in vals if v is not None]
    return min(vals) - peak if vals else None
