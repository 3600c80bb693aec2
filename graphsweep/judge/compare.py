"""Judge every cell: graph runs against the eager baseline of their shape -> comparison.parquet.

Works from the plan and the run tables alone (no spec), so logs ingested from elsewhere compare the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from graphsweep import provenance
from graphsweep.judge import verdict as stats
from graphsweep.store.tables import COMPARISON_COLUMNS, PLAN_COLUMNS, read_table, write_table
from graphsweep.vocab import (
    AA, BLOCKED, COMPARING_VERDICTS, CONTROL, EAGER, FAILED, GRAPH, NOT_COMPARABLE, PAIR, TIMING_VERDICTS,
    UNPARSEABLE, USABLE_OUTCOMES, pair_run_id,
)  # fmt: skip


def _steady_times(by_run: dict[str, pd.DataFrame], run: pd.Series) -> list[float]:
    """The elapsed times of the run's recorded steady window."""
    first, last = run.get("steady_first"), run.get("steady_last")
    it = by_run.get(run.run_id)
    if it is not None and _is_paired(run) and "steady" in it.columns:  # a pair arm: two segments, two windows
        return it[it.steady.fillna(False).astype(bool)].elapsed_ms.dropna().astype(float).tolist()
    if it is None or pd.isna(first) or pd.isna(last):
        return []
    it = it[(it.iteration >= first) & (it.iteration <= last)]
    return it.elapsed_ms.dropna().astype(float).tolist()


def _is_paired(run: pd.Series) -> bool:
    pair = run.get("pair_id")
    return isinstance(pair, str) and bool(pair)


def _pair_arms(runs: pd.DataFrame, jobs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The measured arms of a cell's pair jobs, both in repeat order (judge_cell pairs them by position)."""
    if not len(runs) or "pair_id" not in runs.columns:
        return runs.iloc[:0], runs.iloc[:0]
    mine = runs[runs.pair_id.isin(jobs.run_id)]
    order = {rid: k for rid, k in zip(jobs.run_id, jobs["repeat"])}
    mine = mine.assign(_order=mine.pair_id.map(order)).sort_values("_order").drop(columns="_order")
    return mine[mine.arm == EAGER], mine[mine.arm != EAGER]


def _arm_runs(runs: pd.DataFrame, by_run: dict[str, pd.DataFrame]) -> list[stats.ArmRun]:
    out = []
    for _, r in runs.iterrows():
        out.append(
            stats.ArmRun(
                run_id=r.run_id,
                outcome=str(r.get("outcome") or UNPARSEABLE),
                step_ms=_steady_times(by_run, r) if r.get("outcome") in USABLE_OUTCOMES else [],
                peak_mem_gb=None if pd.isna(r.get("peak_mem_gb")) else float(r.get("peak_mem_gb")),
                reason=str(r.get("reason") or ""),
                error_class=None if pd.isna(r.get("error_class")) else r.get("error_class"),
            )
        )
    return out


def _spec_setting(plan_path: Path, key: str, default: Any) -> Any:
    meta = pq.read_schema(plan_path).metadata or {}
    extra = json.loads(meta.get(b"graphsweep.extra", b"{}"))
    return extra.get("spec", {}).get(key, default)


def compare(plan_path: Path, runs_path: Path, iterations_path: Path, out: Path, margin: float | None = None) -> pd.DataFrame:
    plan = read_table(plan_path, "plan")
    runs = read_table(runs_path, "runs") if Path(runs_path).exists() else pd.DataFrame(columns=["run_id"])
    iterations = read_table(iterations_path, "iterations")
    by_run = {rid: g for rid, g in iterations.groupby("run_id")} if len(iterations) else {}
    if margin is None:
        margin = float(_spec_setting(plan_path, "margin", 0.02))
    paired = bool(_spec_setting(plan_path, "pairing", False))
    axis_cols = [c for c in plan.columns if c not in set(PLAN_COLUMNS)]
    runs_by_id = runs.set_index("run_id", drop=False) if len(runs) else runs
    rows = []
    for cell_id, graph_plan in plan[plan.arm != EAGER].groupby("cell_id", sort=False):
        first = graph_plan.iloc[0]
        eager_plan = plan[(plan.shape_id == first.shape_id) & (plan.arm == EAGER)]
        pair_jobs = graph_plan[graph_plan.arm == PAIR]
        if len(pair_jobs):  # pairing: the cell's jobs ran both arms; its runs are their measured arms
            eager_plan = pair_jobs
            pair_eager, pair_graph = _pair_arms(runs, pair_jobs)
        row: dict[str, Any] = {
            "sweep": first.sweep,
            "cell_id": cell_id,
            "shape_id": first.shape_id,
            "variant": first.variant,
            "impl": first.impl,
            "scope": first.scope,
            **{c: first[c] for c in axis_cols},
            "eager_run_ids": list(eager_plan.run_id),
            "graph_run_ids": list(graph_plan.run_id),
            "eager_run_id": eager_plan.run_id.iloc[0] if len(eager_plan) else None,
            "graph_run_id": first.run_id,
        }
        if len(pair_jobs):
            other = CONTROL if first.impl == "none" else GRAPH
            row.update(eager_run_ids=[pair_run_id(j, EAGER) for j in pair_jobs.run_id],
                       graph_run_ids=[pair_run_id(j, other) for j in pair_jobs.run_id], pair_ids=list(pair_jobs.run_id))
            row.update(eager_run_id=row["eager_run_ids"][0], graph_run_id=row["graph_run_ids"][0])
        blocked = graph_plan[graph_plan.status == BLOCKED]
        eager_blocked = eager_plan[eager_plan.status == BLOCKED]
        if len(blocked) or len(eager_blocked):
            src = blocked.iloc[0] if len(blocked) else eager_blocked.iloc[0]
            row.update(verdict=BLOCKED, reason=f"preflight: {src.rule_message}", rule_id=src.rule_id, gpu_seconds=0.0)
            rows.append(row)
            continue
        if len(pair_jobs):
            eager_runs, graph_runs = pair_eager, pair_graph
        else:
            eager_runs = runs_by_id.loc[runs_by_id.run_id.isin(eager_plan.run_id)] if len(runs) else runs
            graph_runs = runs_by_id.loc[runs_by_id.run_id.isin(graph_plan.run_id)] if len(runs) else runs
        if len(pair_jobs) and not len(eager_runs) and not len(graph_runs):
            row.update(verdict=FAILED, reason="no run of this cell was recorded (runs.parquet has none)")
            rows.append(row)
            continue
        v = stats.judge_cell(_arm_runs(eager_runs, by_run), _arm_runs(graph_runs, by_run), margin=margin,
                             paired=paired and bool(len(pair_jobs)))  # fmt: skip
        row.update({k: getattr(v, k) for k in v.__dataclass_fields__})
        _check_comparable(row, eager_runs, graph_runs)
        row["gpu_seconds"] = float(graph_runs.get("gpu_seconds", pd.Series(dtype=float)).fillna(0).sum())
        if len(pair_jobs):  # the pair is the unit: both arms' share of the jobs belongs to the cell
            row["gpu_seconds"] += float(eager_runs.get("gpu_seconds", pd.Series(dtype=float)).fillna(0).sum())
        if first.arm == CONTROL:
            row["variant"] = AA
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        testable = df.verdict.isin(TIMING_VERDICTS) & (df.variant != AA)
        q = stats.benjamini_hochberg([p if t else None for p, t in zip(df.get("p_value", [None] * len(df)), testable)])
        df["q_value"] = q
    for c in COMPARISON_COLUMNS:
        if c not in df.columns:
            df[c] = None
    ordered = COMPARISON_COLUMNS[:6] + axis_cols + [c for c in COMPARISON_COLUMNS[6:]]
    rest = [c for c in df.columns if c not in ordered]
    df = df[ordered + rest]
    write_table(df, out, "comparison", extra={"margin": margin, "paired": paired})
    return df


def _check_comparable(row: dict[str, Any], eager_runs: pd.DataFrame, graph_runs: pd.DataFrame) -> None:
    """Arms made with another container, GPU, driver or library versions are not compared (anchors idea 12)."""
    diffs = provenance.differences(
        [r for _, r in eager_runs.iterrows()], [r for _, r in graph_runs.iterrows()]
    ) if len(eager_runs) and len(graph_runs) else []
    row["not_comparable_fields"] = [d.field for d in diffs] or None
    if not diffs:
        return
    if row["verdict"] in COMPARING_VERDICTS:
        row.update(verdict=NOT_COMPARABLE, reason=provenance.not_comparable_reason(diffs), speedup=None,
                   ci_low=None, ci_high=None, p_value=None, paired_outcome=f"not-comparable ({row.get('paired_outcome')})")
    else:  # blocked / failed / invalid describe one arm on its own; keep them, say the arms also differ
        row["reason"] = f"{row.get('reason') or ''} (note: {provenance.not_comparable_reason(diffs)})".strip()
