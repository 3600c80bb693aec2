"""Plan a sweep: every run planned once, into one record that the plan table, the dry run, the cost estimate, the
Bridge check and each run's config.yaml all read.

`plan_sweep(spec)` asks each run's workload (graphsweep/workloads) for its preflight violations, its launch plan and
its cost; with `preflight: megatron` it adds Megatron Bridge's own verdict on every planned command.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from graphsweep.judge.design import Design
from graphsweep.plan.cost import sweep_cost
from graphsweep.sweepspec.sweep import Spec
from graphsweep.store import runfiles
from graphsweep.store.tables import PLAN_COLUMNS, write_table
from graphsweep.layout import RunDir, SweepPaths
from graphsweep.records import GraphOverrides, LaunchPlan, RunSpec, SpecError, Violation
from graphsweep.vocab import BLOCKED, EAGER, GRAPH, PAIR
from graphsweep.workloads import bridge_check
from graphsweep.workloads.base import NO_CUDA_HERE, cuda_here, no_cuda_here
from graphsweep.workloads.megatron_bridge import KIND as MEGATRON_BRIDGE, MegatronSpecError
from graphsweep.workloads.registry import for_run

SUBMIT, VERIFY = "submit", "verify"  # plan.parquet `status`, with BLOCKED (the outcome such a run gets)


@dataclass(frozen=True)
class PlannedRun:
    """One run as planned: what it is, what it will execute, what stops it, what it costs."""

    run: RunSpec
    launch: LaunchPlan
    violations: tuple[Violation, ...]
    est_gpu_seconds: float
    verify: bool = False  # spec `verify: true`: submitted although preflight blocks it, to confirm the rule
    graph_switch: GraphOverrides | None = None  # what its command sets that eager's does not (the report pastes it)
    gate_margin: float | None = None  # spec `launch_gate: true`, a graph arm: skipped unless a graph can beat 1 + this
    look: int = 1  # the decision loop's look that first needs this run (1: the first look, always submitted)

    @property
    def status(self) -> str:
        return (VERIFY if self.verify else BLOCKED) if self.violations else SUBMIT

    @property
    def submitted(self) -> bool:
        return self.status != BLOCKED

    def config(self) -> dict[str, Any]:
        """runs/{run_id}/config.yaml: everything the run rule needs (no run reads another run's files)."""
        launch = self.launch.to_dict()
        launch = {"argv": launch.pop("argv"), "env": launch.pop("env"), "shell": self.launch.shell(), **launch}
        out = {"run": self.run.to_record(), "launch": launch, "executor": dict(self.run.executor.record)}
        if self.gate_margin is not None:  # only then: a sweep without the gate keeps its runs' configs as they were
            out["gate"] = {"margin": self.gate_margin}
        return out


LOCAL_CLUSTERS = ("local", "debug")  # submitit executors that run the job on this machine


def plan_sweep(spec: Spec, cluster: str | None = None, paths: SweepPaths | None = None) -> list[PlannedRun]:
    """Every run of the sweep, planned once.

    `cluster`: the executor the workflow uses (its `--config cluster=`, the Slurm profile's), else the spec's: a local
    one on a machine without CUDA blocks the runs that need a CUDA device, except those whose result `paths` (the
    results folder) already holds: they ran elsewhere, and re-deriving them here needs no device."""
    mode = spec.preflight
    runs = spec.runs()
    plans = _launch_plans(spec, runs)
    violations: dict[str, list[Violation]] = {r.run_id: [] for r in runs}
    if mode != "none":
        for r in runs:
            violations[r.run_id] += for_run(r).preflight(r)
        if mode == "megatron" and spec.workload["kind"] == MEGATRON_BRIDGE:
            for run_id, found in _bridge_verdicts(spec, runs, plans).items():
                violations[run_id] += found
    where = cluster or spec.executor.cluster
    if where in LOCAL_CLUSTERS and not spec.is_ingest and not cuda_here():
        for r in runs:  # ingested logs ran elsewhere already: nothing is started here
            needs = getattr(for_run(r), "needs_cuda", None)
            if violations[r.run_id] or needs is None or not needs(r):
                continue  # a run the spec's settings block keeps that reason: it would not start anywhere
            if not (paths is not None and paths.run_json(r.run_id).exists()):
                violations[r.run_id].append(no_cuda_here(where, r))
    verify = spec.verify
    gate = float(spec.margin) if spec.launch_gate and not spec.is_ingest else None
    design = loop_design(spec)
    return [PlannedRun(r, plans[r.run_id], tuple(violations[r.run_id]), for_run(r).estimate(r), verify,
                       for_run(r).graph_switch(r), gate if r.arm == GRAPH else None,
                       design.look_of(r.repeat) if design else 1) for r in runs]


def loop_design(spec: Spec) -> Design | None:
    """The looks of the sweep's decision loop (judge/sequential.py): the first at the spec's repeats, then one per
    decide.step jobs per arm, the boundaries spread over decide.horizon. None: no loop (switched off, or ingested)."""
    if not spec.loops:
        return None
    d = spec.decide
    return Design(first=spec.repeats, step=d.step, horizon=max(d.horizon, spec.repeats))


def first_look(planned: Sequence[PlannedRun]) -> list[PlannedRun]:
    """The runs the sweep submits before its first look: those of look 1, preflight-blocked ones aside."""
    return [p for p in submitted(planned) if p.look == 1]


def _launch_plans(spec: Spec, runs: Sequence[RunSpec]) -> dict[str, LaunchPlan]:
    """Every run's command; a spec the workload cannot make a command of is a SpecError (one line), not a traceback
    (the workload's validate refuses what it can name before this)."""
    plans = {}
    for r in runs:
        try:
            plans[r.run_id] = for_run(r).launch_plan(r)
        except MegatronSpecError as exc:
            raise SpecError(spec.path, "workload", spec.workload.get("kind"), f"run {r.run_id}: {exc}") from None
    return plans


def gate_inputs(planned: PlannedRun, plan: Sequence[PlannedRun]) -> list[str]:
    """The run ids a gated graph run waits for: its shape's first-look eager runs (none when the run is not gated)."""
    if planned.gate_margin is None:
        return []
    return [p.run.run_id for p in plan if p.run.shape_id == planned.run.shape_id and p.run.arm == EAGER and p.submitted
            and p.look == 1]


def _bridge_verdicts(spec: Spec, runs: Sequence[RunSpec], plans: dict[str, LaunchPlan]) -> dict[str, list[Violation]]:
    """`preflight: megatron`: Megatron Bridge's own runtime_config_update on every planned run's overrides. A pair
    job is judged by its two arms (either one refused blocks it)."""
    python = spec.workload.get("bridge_python") or os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON")
    if not python:
        raise SpecError(spec.path, "workload.bridge_python", None,
                        "preflight: megatron needs a Python with Megatron Bridge installed: set workload.bridge_python "
                        "or GRAPHSWEEP_MEGATRON_PYTHON (tools/megatron-venv.sh builds one), or use preflight: rules")
    recipe = str(spec.workload.get("recipe") or "")
    cells, owner = [], {}
    for r in runs:
        arms = plans[r.run_id].arms or {"": plans[r.run_id]}
        for label, plan in arms.items():
            cells.append((f"{r.run_id}#{label}", plan, recipe))
            owner[f"{r.run_id}#{label}"] = r.run_id
    found: dict[str, list[Violation]] = {r.run_id: [] for r in runs}
    for cell_id, violations in bridge_check.preflight_plans(cells, python).items():
        found[owner[cell_id]] += violations
    return found


def plan_frame(planned: Sequence[PlannedRun]) -> pd.DataFrame:
    """plan.parquet: one row per run (cell x arm x repeat), blocked runs with the constraint that blocks them."""
    rows: list[dict[str, Any]] = []
    for p in planned:
        rec = p.run.to_record()
        shape, settings = rec.pop("shape"), rec.pop("settings")
        rec.update(
            status=p.status,
            rule_id=";".join(v.rule for v in p.violations) or None,
            rule_message=" | ".join(v.message for v in p.violations) or None,
            rule_source=" | ".join(v.source for v in p.violations) or None,
            command=p.launch.shell(),
            graph_overrides=p.graph_switch.to_record() if p.graph_switch else None,
            seed=p.launch.seed,
            est_gpu_seconds=p.est_gpu_seconds,  # kept for blocked runs too: the report shows the GPU time saved
            look=p.look,
        )
        rec.update({k: settings[k] for k in shape})  # one column per axis
        rows.append(rec)
    df = pd.DataFrame(rows)
    axis_cols = [c for c in df.columns if c not in PLAN_COLUMNS]
    return df[PLAN_COLUMNS + axis_cols]


def submitted(planned: Sequence[PlannedRun]) -> list[PlannedRun]:
    """Runs the workflow submits: all but preflight-blocked ones (unless `verify` asks to confirm the rules)."""
    return [p for p in planned if p.submitted]


def write_plan(spec: Spec, planned: Sequence[PlannedRun], out: str | Path) -> pd.DataFrame:
    df = plan_frame(planned)
    write_table(df, out, "plan", extra={"spec": spec.raw, "spec_path": spec.path,
                                         "decide": spec.decide.to_dict() if spec.loops else None})
    return df


def write_run_config(config: PlannedRun | Mapping[str, Any], run: RunDir) -> None:
    """runs/{run_id}/config.yaml, whole or not at all (a temp file renamed over it)."""
    runfiles.write_run_config(config.config() if isinstance(config, PlannedRun) else config, run.config)


def wall_seconds(p: PlannedRun) -> float:
    """The estimated wall time of one job: its GPU-seconds over its GPUs."""
    return p.est_gpu_seconds / max(1, p.launch.gpus)


def check_plan(spec: Spec, planned: Sequence[PlannedRun], spent: Mapping[str, float] | None = None) -> None:
    """What a spec cannot be run with, known once it is planned (check-spec, plan and the workflow all refuse it):
    a run estimated beyond the executor's time limit (it would time out, retried with more time at a GPU's cost),
    and a sweep whose first look is over `budget_gpu_hours`: what its finished runs took (`spent`, plan/cost.py
    spent_of) and the corrected estimate of the rest of the first look (the decision loop adds rounds only while they
    fit decide.gpu_hours, itself at most the budget). Ingested logs submit nothing: no limit applies."""
    if len(planned) > spec.max_runs:
        raise SpecError(spec.path, "max_runs", spec.max_runs, f"the sweep plans {len(planned)} runs (every cell to "
                        f"{spec.planned_repeats} repeats, the decision loop's budget): split the sweep into several "
                        "specs, lower decide.max_repeats, or raise max_runs")
    if not spec.is_ingest and not measurable_cells(planned):
        raise NothingToMeasure(spec, planned)
    sub = submitted(planned)
    if spec.is_ingest or not sub:
        return
    limit_min = spec.executor.timeout_min
    worst = max(sub, key=wall_seconds)
    if wall_seconds(worst) > limit_min * 60:
        need = math.ceil(wall_seconds(worst) / 60)
        raise SpecError(spec.path, "executor.timeout_min", limit_min,
                        f"run {worst.run.run_id} is estimated at {wall_seconds(worst) / 60:.1f} min "
                        f"({worst.est_gpu_seconds:.0f} GPU-s on {worst.launch.gpus} GPU(s)), beyond the time limit: it "
                        f"would time out; raise executor.timeout_min to at least {need} or lower iterations")
    spent = spent or {}
    first = [p for p in sub if p.look == 1 or p.run.run_id in spent]
    cost = sweep_cost(first, spent)
    budget = float(spec.budget_gpu_hours)
    if cost.total_h > budget:
        raise SpecError(spec.path, "budget_gpu_hours", spec.budget_gpu_hours,
                        f"the sweep's first look is estimated at {cost.total_h:,.1f} GPU-hours ({len(first)} runs to "
                        f"submit; {cost.correction.describe()}), over its budget: raise budget_gpu_hours, or drop "
                        "shapes, variants or repeats")


def runs_somewhere(p: PlannedRun) -> bool:
    """Submitted, or blocked only because this machine has no CUDA device (a cluster would run it)."""
    return p.submitted or all(v.rule == NO_CUDA_HERE for v in p.violations)


def measurable_cells(planned: Sequence[PlannedRun]) -> list[str]:
    """The graph cells that can get a timed verdict: a graph run (or a pair job) of the cell and an eager run of its
    shape that preflight lets run. A run blocked only for want of a CUDA device on this machine counts: the spec
    is not at fault, a cluster runs it (check-spec --cluster slurm)."""
    eager = {p.run.shape_id for p in planned if p.run.arm == EAGER and runs_somewhere(p)}
    cells = {p.run.cell_id for p in planned if runs_somewhere(p) and (
        p.run.arm == PAIR and p.run.variant.is_graph or p.run.arm == GRAPH and p.run.shape_id in eager)}
    return sorted(cells)


class NothingToMeasure(SpecError):
    """No cell of the sweep can get a timed verdict: every one is blocked before a job (its graph runs or its
    shape's eager runs). Carries the plan, so that check-spec can show each cell's rule."""

    def __init__(self, spec: Spec, planned: Sequence[PlannedRun]):
        self.spec, self.planned = spec, tuple(planned)
        planned = [p for p in planned if p.look == 1]  # the counts check-spec shows: the first look's runs
        rules = Counter(v.rule for p in planned for v in p.violations if v.rule != NO_CUDA_HERE)
        rule, runs = rules.most_common(1)[0]
        message = next(v.message for p in planned for v in p.violations if v.rule == rule)
        others = f"; also {', '.join(r for r in rules if r != rule)}" if len(rules) > 1 else ""
        blocked = sum(1 for p in planned if not runs_somewhere(p))
        super().__init__(spec.path, "preflight", spec.preflight, (
            f"no cell can give a timed verdict: preflight blocks {blocked} of {len(planned)} runs, which leaves no "
            f"graph cell with both arms (rule {rule} on {runs} run(s): {' '.join(message.split())}{others}); change "
            "the settings the rule names, or give verify: true to submit them and see Megatron refuse them"))


def dry_run_summary(planned: Sequence[PlannedRun], spent: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The dry run's counts and GPU-hours: the first look (spent by the sweep's finished runs, plus the corrected
    estimate of the rest: plan/cost.py), and the most the decision loop may add after it."""
    spent = spent or {}
    sub = submitted(planned)
    first = [p for p in sub if p.look == 1 or p.run.run_id in spent]
    later = [p for p in sub if p not in first]
    cost = sweep_cost(first, spent)
    looked = [p for p in planned if p.look == 1]
    return {
        "runs": len(looked),
        "to_submit": len(first),
        "blocked": sum(not p.submitted for p in looked),
        "gpu_hours": round(cost.total_h, 3),
        "spent_gpu_hours": round(cost.spent_s / 3600.0, 3),
        "estimate": cost.correction.describe(),
        "loop_runs": len(later),
        "loop_gpu_hours": round(cost.correction.apply_h(later), 3),
    }
