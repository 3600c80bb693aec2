"""The one plan of a sweep: what the workflow (rules/common.smk), `graphsweep plan` and `graphsweep check-spec` all
build, by the same steps, so that the three never disagree on a run.

    plan_for(spec_path, results, cluster)  the spec, with the repeats more-repeats asked for, planned and checked
    write_plan_file(...)                    the plan job: plan.parquet
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from graphsweep.layout import SweepPaths
from graphsweep.plan.cost import spent_of
from graphsweep.plan.planner import PlannedRun, check_plan, plan_sweep, submitted, write_plan
from graphsweep.plan.repeats import apply_raise
from graphsweep.sweepspec.load import load_spec
from graphsweep.sweepspec.sweep import Spec
from graphsweep.workloads.base import NO_CUDA_HERE


@dataclass(frozen=True)
class SweepPlan:
    """A sweep as planned for one results folder and one executor."""

    spec: Spec  # with the loop's budget as results/{sweep}/extra_repeats.yaml raised it
    planned: tuple[PlannedRun, ...]  # every run, blocked ones included, in the spec's order
    paths: SweepPaths  # results/{sweep}
    spent: Mapping[str, float]  # what the sweep's finished runs took (plan/cost.py spent_of)

    @property
    def submitted(self) -> list[PlannedRun]:
        return submitted(self.planned)

    def digest(self) -> str:
        """What the plan job writes, in one string (the plan rule's params: a changed command, a run newly blocked or
        a new estimate writes the plan again; each run's own launch record is its run rule's params)."""
        # Whether a run is submitted, not its status: a `verify: true` run that this machine's missing CUDA device
        # would block plans as `verify` before it ran and as `submit` once its result is here (the planner does not
        # block a run the results folder holds); the plan as written before it ran stays (it is the plan). Of a
        # submitted run, its config.yaml less the shell line, which argv and env fix (quoting every command of an
        # 8,000-run sweep was most of the digest's time).
        rows = [(p.run.run_id, p.submitted, [v.rule for v in p.violations if v.rule != NO_CUDA_HERE],
                 p.est_gpu_seconds, p.look,
                 (p.run.to_record(), p.launch.to_dict(), p.run.executor.record, p.gate_margin) if p.submitted else None)
                for p in self.planned]
        return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def plan_for(spec_path: str | Path, results: str | Path, cluster: str | None = None) -> SweepPlan:
    """Load, raise the loop's budget, plan and check a sweep; raises SpecError (the spec, or a limit the plan passes)
    or RepeatsError (results/{sweep}/extra_repeats.yaml).

    `cluster`: the executor the workflow uses (`--config cluster=`, the Slurm profile's), else the spec's; a local
    one on a machine without CUDA blocks the runs that need a device, except those the results folder holds."""
    spec = load_spec(spec_path)
    spec = apply_raise(spec, results)  # the loop's budget as more-repeats raised it for this results folder
    paths = SweepPaths(results, spec.name)
    planned = tuple(plan_sweep(spec, cluster, paths))
    spent = spent_of(paths)  # the rest's estimates follow what the finished runs took
    check_plan(spec, planned, spent)  # beyond the time limit, over the GPU-hour budget, over max_runs
    return SweepPlan(spec, planned, paths, spent)


def write_plan_file(spec_path: str | Path, results: str | Path, cluster: str | None, digest: str,
                    out: str | Path) -> None:
    """The plan job: the sweep planned again as the controller planned it, into plan.parquet. It can differ from the
    controller's only where a run of this invocation finished before it (a `verify: true` graph arm that a machine
    without CUDA would block: it ran, so it is no longer blocked); the job says so in its log."""
    sweep = plan_for(spec_path, results, cluster)
    if sweep.digest() != digest:
        print(f"graphsweep: the plan of {spec_path} changed while the sweep ran (a run finished before the plan job); "
              "written as it is now")
    write_plan(sweep.spec, sweep.planned, out)
