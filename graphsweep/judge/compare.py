"""Judge every cell: graph runs against the eager baseline of their shape -> comparison.parquet.

Works from the plan and the run tables alone (no spec), so logs ingested from elsewhere compare the same way.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pyarrow.parquet as pq

from graphsweep import logformat as lf
from graphsweep import provenance
from graphsweep.judge import host
from graphsweep.judge import interval as iv
from graphsweep.judge import prose
from graphsweep.judge import verdict as stats
from graphsweep.store.tables import COMPARISON_COLUMNS, PLAN_COLUMNS, read_table, write_table
from graphsweep.vocab import (
    AA, BLOCKED, COMPARING_VERDICTS, CONTROL, EAGER, FAILED, GRAPH, INCONCLUSIVE, NOT_COMPARABLE, PAIR, SLOWDOWN,
    SPEEDUP, TIMING_VERDICTS, NO_GRAPH, UNPARSEABLE, USABLE_OUTCOMES, UNVERIFIED, pair_run_id,
)  # fmt: skip


GATED_VERDICTS = (SPEEDUP, SLOWDOWN, UNVERIFIED)  # the claims of a difference the family gate checks


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


def _losses(by_run: dict[str, pd.DataFrame], run: pd.Series) -> tuple[dict[int, float], int]:
    """(iteration -> lm loss, the iterations each value averages) of a run; a pair arm's first segment, numbered
    within it (both arms start there).

    Only what the log printed: a line without the `lm loss` key reads NaN in iterations.parquet, and that is a NaN
    only where the log's own print pattern expects a loss (logformat.loss_broken_from; from the parser's NaN
    iteration on, too); a log that prints its loss every N iterations is compared on the iterations it printed. A
    log that prints a line every N iterations holds the mean over them there (parity.on_grid)."""
    it = by_run.get(run.run_id)
    if it is None or "loss" not in it.columns:
        return {}, 1
    if "segment" in it.columns and "segment_iteration" in it.columns and it.segment.notna().any():
        first = it.segment.dropna().iloc[0]
        it = it[it.segment == first].assign(iteration=lambda d: d.segment_iteration)
    rows = sorted((int(i), float(x)) for i, x in zip(it.iteration, it.loss) if pd.notna(i))
    # lines whose every iteration was skipped (an fp16 loss-scale skip) hold no loss: neither a NaN nor a value
    skipped = lf.whole_lines_skipped(sorted(zip(it.iteration.astype(int), it.skipped_iterations.astype(float)))) \
        if "skipped_iterations" in it.columns else set()
    rows = [(i, x) for i, x in rows if i not in skipped]
    broken = lf.loss_broken_from(rows)
    failed = _number(run, "failed_iteration")
    if run.get("error_class") == stats.NAN_CLASS and failed is not None and any(math.isfinite(x) for _, x in rows):
        broken = int(failed) if broken is None else min(broken, int(failed))
    loss = {i: x for i, x in rows if math.isfinite(x) and (broken is None or i < broken)}
    if broken is not None:  # from there on the training is NaN: what it printed after means nothing
        after = {i: x for i, x in rows if i >= broken and not math.isfinite(x)}
        loss.update(after or {broken: math.nan})
    return loss, lf.print_interval([i for i, _ in rows])


def _gpu_names(*arms: pd.DataFrame) -> str | None:
    """The GPUs the cell's runs ran on, as each job recorded them (prov_gpu_name): one name, or a list when mixed."""
    names = sorted({str(n) for a in arms if "prov_gpu_name" in a.columns for n in a.prov_gpu_name.dropna()})
    return ", ".join(names) or None


def memory_figure(eager_runs: pd.DataFrame, graph_runs: pd.DataFrame) -> str | None:
    """The first of MEMORY_FIGURES that both arms have for at least one run (for a graph-only OOM: eager alone)."""
    for col in stats.MEMORY_FIGURES:
        have_e = col in eager_runs.columns and eager_runs[col].notna().any()
        have_g = col in graph_runs.columns and graph_runs[col].notna().any()
        graph_ran = "outcome" in graph_runs.columns and graph_runs.outcome.isin(USABLE_OUTCOMES).any()
        if have_e and (have_g or not graph_ran):
            return col
    return None


def _number(run: pd.Series, key: str) -> float | None:
    v = run.get(key)
    return None if v is None or pd.isna(v) else float(v)


def _plan_seeds(plan: pd.DataFrame) -> dict[str, int]:
    """run id -> the seed its command set (a pair job's arms share their job's)."""
    if "seed" not in plan.columns:
        return {}
    out = {}
    for rid, arm, seed in zip(plan.run_id, plan.arm, plan.seed):
        if seed is not None and pd.notna(seed):
            out[rid] = int(seed)
            if arm == PAIR:
                out.update({pair_run_id(rid, a): int(seed) for a in (EAGER, GRAPH, CONTROL)})
    return out


def arm_runs(runs: pd.DataFrame, by_run: dict[str, pd.DataFrame], seeds: Mapping[str, int],
             mem: str | None) -> list[stats.ArmRun]:
    """The judge's record of each run of an arm, from its runs.parquet row and its iteration rows.

    Every run brings its loss, usable or not: a run that NaN'd is a result about the model, not a lost run.
    """
    out = []
    for _, r in runs.iterrows():
        usable = r.get("outcome") in USABLE_OUTCOMES
        loss, span = _losses(by_run, r)
        seed = _number(r, "seed")  # the seed the log states, else the one its command set
        seed = seeds.get(r.run_id) if seed is None else seed
        out.append(
            stats.ArmRun(
                run_id=r.run_id,
                outcome=str(r.get("outcome") or UNPARSEABLE),
                step_ms=_steady_times(by_run, r) if usable else [],
                resolution_ms=_number(r, "elapsed_resolution_ms"),
                mem_gb=_number(r, mem) if mem else None,
                reason=str(r.get("reason") or ""),
                error_class=None if pd.isna(r.get("error_class")) else r.get("error_class"),
                seed=None if seed is None else int(seed),
                loss=loss,
                loss_span=span,
                steady_reason=str(r.get("steady_reason") or ""),
                gpu_busy_ms=_number(r, "gpu_busy_ms"),
                graphs_captured=None if (n := _number(r, "graphs_captured")) is None else int(n),
            )
        )
    return out


def judge_runs(eager_runs: pd.DataFrame, graph_runs: pd.DataFrame, by_run: dict[str, pd.DataFrame],
               seeds: Mapping[str, int], *, margin: float, alpha: float, paired: bool = False,
               control: bool = False, reference_runs: pd.DataFrame | None = None) -> stats.Verdict:
    """One cell from its runs' table rows: the memory figure, the arms' records and the verdict.

    The one path from runs to a verdict: the workflow's compare (below) and `graphsweep compare` (commands/compare.py,
    from logs) both call it. `reference_runs` are more eager-like runs of the shape of the same seeds (the workflow:
    its A/A control runs; `graphsweep compare --reference`): loss references only, checked against the eager runs
    like each other (parity.check_references), never the timing; a NaN/Inf in one breaks the baseline.
    """
    mem = memory_figure(eager_runs, graph_runs)
    ref = arm_runs(reference_runs, by_run, seeds, None) if reference_runs is not None and len(reference_runs) else []
    return stats.judge_cell(arm_runs(eager_runs, by_run, seeds, mem), arm_runs(graph_runs, by_run, seeds, mem),
                            margin=margin, alpha=alpha, paired=paired, control=control, mem_metric=mem,
                            reference=ref)


def _judging(plan_path: Path) -> tuple[float, bool, dict[str, int]]:
    """(margin, adaptive_repeats, extra repeats per cell) of the spec the plan was made from."""
    meta = pq.read_schema(plan_path).metadata or {}
    extra = json.loads(meta.get(b"graphsweep.extra", b"{}"))
    spec = extra.get("spec", {})
    # a plan written before `adaptive_repeats` existed had one look: False is that plan's fact, not a default
    return float(spec["margin"]), bool(spec.get("adaptive_repeats")), dict(extra.get("extra_repeats") or {})


def alpha_of(cell_id: str, adaptive: bool, extra: dict[str, int]) -> float:
    """The alpha a cell is judged at: all of it in a one-look sweep; the look's share in an adaptive one."""
    if not adaptive:
        return iv.alpha_for_look(1, 1)
    return iv.alpha_for_look(2 if cell_id in extra else 1, 2)


def compare(plan_path: Path, runs_path: Path, iterations_path: Path, out: Path, margin: float | None = None) -> pd.DataFrame:
    plan = read_table(plan_path, "plan")
    runs = read_table(runs_path, "runs") if Path(runs_path).exists() else pd.DataFrame(columns=["run_id"])
    iterations = read_table(iterations_path, "iterations")
    by_run = {rid: g for rid, g in iterations.groupby("run_id")} if len(iterations) else {}
    spec_margin, adaptive, extra = _judging(plan_path)
    seeds = _plan_seeds(plan)
    margin = spec_margin if margin is None else margin
    paired = bool(len(plan) and (plan.arm == PAIR).any())
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
            other = CONTROL if first.impl == NO_GRAPH else GRAPH
            row.update(eager_run_ids=[pair_run_id(j, EAGER) for j in pair_jobs.run_id],
                       graph_run_ids=[pair_run_id(j, other) for j in pair_jobs.run_id], pair_ids=list(pair_jobs.run_id))
            row.update(eager_run_id=row["eager_run_ids"][0], graph_run_id=row["graph_run_ids"][0])
        blocked = graph_plan[graph_plan.status == BLOCKED]
        eager_blocked = eager_plan[eager_plan.status == BLOCKED]
        if len(blocked) or len(eager_blocked):
            src = blocked.iloc[0] if len(blocked) else eager_blocked.iloc[0]
            row.update(verdict=BLOCKED, failure_detail=src.rule_message, rule_id=src.rule_id, gpu_seconds=0.0,
                       margin=margin)
            rows.append(row)
            continue
        if len(pair_jobs):
            eager_runs, graph_runs = pair_eager, pair_graph
        else:
            eager_runs = runs_by_id.loc[runs_by_id.run_id.isin(eager_plan.run_id)] if len(runs) else runs
            graph_runs = runs_by_id.loc[runs_by_id.run_id.isin(graph_plan.run_id)] if len(runs) else runs
        if len(pair_jobs) and not len(eager_runs) and not len(graph_runs):
            row.update(verdict=FAILED, failure_detail="no run of this cell was recorded (runs.parquet has none)",
                       margin=margin)
            rows.append(row)
            continue
        control = first.arm == CONTROL or first.impl == NO_GRAPH
        aa_ids = plan[(plan.shape_id == first.shape_id) & (plan.arm == CONTROL)].run_id  # the A/A runs: eager too
        reference = None if control or not len(runs) else runs[runs.run_id.isin(aa_ids)]
        v = judge_runs(eager_runs, graph_runs, by_run, seeds, margin=margin, alpha=alpha_of(cell_id, adaptive, extra),
                       paired=paired and bool(len(pair_jobs)), control=control, reference_runs=reference)
        row.update(asdict(v))
        if not control:  # how much of the eager step's host time this variant's graphs take off the host
            row.update(host.cover(eager_runs, first.impl, first.scope))
        _check_comparable(row, eager_runs, graph_runs)
        row["gpu_seconds"] = float(graph_runs.get("gpu_seconds", pd.Series(dtype=float)).fillna(0).sum())
        if len(pair_jobs):  # the pair is the unit: both arms' share of the jobs belongs to the cell
            row["gpu_seconds"] += float(eager_runs.get("gpu_seconds", pd.Series(dtype=float)).fillna(0).sum())
        row["gpu_names"] = _gpu_names(eager_runs, graph_runs)
        if first.arm == CONTROL:
            row["variant"] = AA
        rows.append(row)
    for row in rows:
        row.setdefault("family_gated", False)
    df = pd.DataFrame(rows)
    if len(df):
        df = family_gate(df)
    for c in COMPARISON_COLUMNS:
        if c not in df.columns:
            df[c] = None
    ordered = COMPARISON_COLUMNS[:6] + axis_cols + [c for c in COMPARISON_COLUMNS[6:]]
    rest = [c for c in df.columns if c not in ordered]
    df = df[ordered + rest]
    write_table(df, out, "comparison", extra={"margin": margin, "paired": paired, "adaptive_repeats": adaptive})
    return df


def family_gate(df: pd.DataFrame) -> pd.DataFrame:
    """One family per sweep: every cell that claims a difference beyond the margin (p_beyond) shares the shape's
    eager baseline with its neighbours, so a decided speedup or slowdown needs its Benjamini-Hochberg q below the
    alpha it was judged at, not only its own p (docs/statistics.md "Many variants, one baseline"). A cell that
    fails the gate is inconclusive, and its reason says why."""
    testable = df.verdict.isin(TIMING_VERDICTS) & (df.variant != AA)
    none = pd.Series([None] * len(df), index=df.index)  # a sweep of blocked cells only has no timing columns
    p = df["p_beyond"] if "p_beyond" in df.columns else none
    df["q_value"] = iv.benjamini_hochberg([x if t and pd.notna(x) else None for x, t in zip(p, testable)])
    q = pd.to_numeric(df["q_value"], errors="coerce")
    alpha = pd.to_numeric(df["alpha"] if "alpha" in df.columns else none, errors="coerce")
    gated = df.verdict.isin(GATED_VERDICTS) & (df.variant != AA) & (q >= alpha)
    df["family_gated"] = gated.to_numpy()
    df.loc[gated, "verdict"] = INCONCLUSIVE
    df["reason"] = [prose.reason(r) for r in df.to_dict("records")]  # the sentence follows the final verdict
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
        row.update(verdict=NOT_COMPARABLE, failure_detail=provenance.not_comparable_reason(diffs), speedup=None,
                   ci_low=None, ci_high=None, p_beyond=None, p_within=None,
                   paired_outcome=f"not-comparable ({row.get('paired_outcome')})")
