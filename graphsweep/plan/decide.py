"""The decision loop in the workflow: after each look, which runs come next (rules/decide.smk).

Look 1 judges the sweep's first repeats. Each later look k needs, for every shape that still has a live cell (one
that is neither decided nor dropped: judge/loop.py), one more round of runs: the shape's eager baseline and A/A
control, and the graph arm of each of its live cells, up to the k-th look's jobs per arm. The look's checkpoint
(rules/decide.smk) writes `looks/look-{k}.json`, a `LookRecord`: what it judged, where each cell stands, and the
runs the next look needs; Snakemake then runs exactly those and takes the next look. The loop ends when no cell is
live, or when the next round would go beyond the budget: `decide.max_repeats` jobs per arm (as more-repeats raised it)
or `decide.gpu_hours` for the whole sweep (default: its budget_gpu_hours), what the finished runs took counted.

Every look is judged by judge/compare.py `judge_sweep`, the same replay the final comparison makes, so what the loop
decided and what the report says cannot differ. A look is a pure function of the runs it names: after Ctrl-C or a
killed controller, Snakemake takes the looks again from the files and submits only what is missing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from graphsweep.judge import compare as judge
from graphsweep.judge import loop
from graphsweep.layout import SweepPaths
from graphsweep.plan.looks import LookRecord, first_look_runs
from graphsweep.store.aggregate import gather
from graphsweep.store.tables import read_table, table_info
from graphsweep.store.timeparts import spent_by_run
from graphsweep.vocab import (
    BLOCKED, CONTROL, EAGER, LOOP_ALL_DECIDED, LOOP_GOES_ON, LOOP_LIVE, LOOP_NO_ROUNDS, LOOP_NOTHING_TO_RUN,
    LOOP_OUT_OF_GPU_HOURS, LOOP_OUT_OF_REPEATS,
)  # fmt: skip



def _meta(plan_path: Path) -> dict[str, Any]:
    return table_info(plan_path)["extra"]


def budget_hours(spec: Mapping[str, Any], decide: Mapping[str, Any] | None) -> float:
    """The GPU-hours the loop may take the whole sweep to: decide.gpu_hours, else the spec's budget_gpu_hours."""
    hours = (decide or {}).get("gpu_hours")
    return float(hours if hours is not None else spec.get("budget_gpu_hours", math.inf))


def take_look(k: int, plan_path: Path, paths: SweepPaths, previous: LookRecord | None,
              rounds: bool = True) -> LookRecord:
    """Look k: judge the runs of looks 1..k (the sweep's replay, judge/compare.py judge_sweep) and say what comes
    next. `previous` is look k - 1's record (None for look 1). Without `rounds` the loop only goes on to runs that
    are there already (their run.json written): it submits nothing."""
    plan = read_table(plan_path, "plan")
    if "look" not in plan.columns:
        plan = plan.assign(look=1)
    extra = _meta(plan_path)
    spec, decide = extra.get("spec") or {}, extra.get("decide")
    judged = first_look_runs(plan) if previous is None else [*previous.runs, *previous.next_runs]
    runs, iterations = gather(plan_path, [paths.run(r) for r in judged])
    by_run = {rid: g for rid, g in iterations.groupby("run_id")} if len(iterations) else {}
    sj = judge.judge_sweep(plan, runs, by_run, margin=float(spec["margin"]), spec=spec, decide=decide, upto=k)
    spent = float(pd.to_numeric(runs.get("gpu_seconds"), errors="coerce").fillna(0).sum()) / 3600 if len(runs) else 0.0
    budget = budget_hours(spec, decide)
    n_now = max((s.look for s in sj.states.values()), default=1)
    n_now = sj.design.looks[n_now - 1] if sj.design and n_now >= 1 else int(spec.get("repeats") or 1)
    cells = {c: {"status": s.status, "look": s.look, "verdict": s.judged.verdict if s.judged else None,
                 "speedup": _num(s.judged.ratio if s.judged else None),
                 "ci_low": _num(s.judged.lo if s.judged else None), "ci_high": _num(s.judged.hi if s.judged else None),
                 "q": _num(s.q)} for c, s in sj.states.items()}
    if sj.next_n is None:
        end = LOOP_OUT_OF_REPEATS if any(s.status == loop.LOOP_BUDGET for s in sj.states.values()) else LOOP_ALL_DECIDED
        return LookRecord(k, n_now, tuple(judged), (), end, spent, 0.0, budget, sj.max_repeats, cells)

    def ends_here(end: str, hours: float) -> LookRecord:  # the loop ends with cells live: out of budget
        for c in cells.values():
            if c["status"] == LOOP_LIVE:
                c["status"] = loop.LOOP_BUDGET
        return LookRecord(k, n_now, tuple(judged), (), end, spent, hours, budget, sj.max_repeats, cells)

    nxt = next_runs(plan, sj.states, set(judged), sj.next_n)
    if not rounds and (not nxt or not all(paths.run_json(r).exists() for r in nxt)):
        # asked for no rounds (re-deriving runs made elsewhere): the round this machine might not run is not the end
        return ends_here(LOOP_NO_ROUNDS, 0.0)
    if not nxt:  # the live cells' next graph runs cannot run here (blocked: no CUDA device, a preflight rule)
        return ends_here(LOOP_NOTHING_TO_RUN, 0.0)
    cost = next_hours(plan, runs, nxt)
    if spent + cost > budget:
        return ends_here(LOOP_OUT_OF_GPU_HOURS, cost)
    return LookRecord(k, n_now, tuple(judged), tuple(nxt), LOOP_GOES_ON, spent, cost, budget, sj.max_repeats, cells)


def next_runs(plan: pd.DataFrame, states: Mapping[str, loop.CellState], judged: set[str], upto: int) -> list[str]:
    """The runs the next look needs, up to `upto` jobs per arm and not judged yet, preflight-blocked ones aside: the
    own runs (graph arm, or pair jobs) of every live cell that has one to run, and the eager baseline and A/A control
    of their shapes. A live cell whose next runs are all blocked (a graph arm on a machine without CUDA) adds nothing,
    and neither does its shape for it."""
    rows = plan[(plan["repeat"] <= upto) & (plan.status != BLOCKED) & ~plan.run_id.isin(judged)]
    live = [c for c, s in states.items() if s.live]
    moving = [c for c in live if rows.cell_id.eq(c).any()]
    shapes = {states[c].shape_id for c in moving}
    controls = [c for c, s in states.items() if s.control and s.shape_id in shapes]
    mine = rows.cell_id.isin([*moving, *controls]) | (rows.shape_id.isin(shapes) & rows.arm.isin([EAGER, CONTROL]))
    return list(rows.run_id[mine])


def next_hours(plan: pd.DataFrame, runs: pd.DataFrame, run_ids: Sequence[str]) -> float:
    """GPU-hours the next round will take: each run what its cell's finished runs took (their median), else the
    plan's estimate corrected by what the finished runs took against theirs."""
    took = spent_by_run(runs)  # by planned run: a pair job's two arms together
    cell_of = dict(zip(plan.run_id, plan.cell_id))
    finished = pd.DataFrame({"cell_id": [cell_of.get(r) for r in took], "took": list(took.values())})
    by_cell = finished.groupby("cell_id").took.median().to_dict() if len(finished) else {}
    est = dict(zip(plan.run_id, pd.to_numeric(plan.est_gpu_seconds, errors="coerce")))
    ratios = [t / est[r] for r, t in took.items() if est.get(r)]
    ratio = float(pd.Series(ratios).median()) if ratios else 1.0
    total = sum(by_cell.get(cell_of[r], (est.get(r) or 0.0) * ratio) for r in run_ids)
    return total / 3600.0


def _num(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def final_look(looks: Sequence[LookRecord]) -> LookRecord:
    """The look the loop ended at (the last of a chain whose every earlier look went on)."""
    return looks[-1]
