"""The one plan of a sweep: what the workflow (rules/common.smk), `graphsweep plan` and `graphsweep check-spec` all
build, by the same steps, so that the three never disagree on a run.

    plan_for(spec_path, results, cluster)  the spec, with the repeats more-repeats asked for, planned and checked
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from graphsweep.layout import SweepPaths
from graphsweep.plan.cost import spent_of
from graphsweep.plan.planner import PlannedRun, check_plan, plan_sweep, submitted, write_plan
from graphsweep.plan.repeats import apply_extra
from graphsweep.sweepspec.load import load_spec
from graphsweep.sweepspec.sweep import Spec


@dataclass(frozen=True)
class SweepPlan:
    """A sweep as planned for one results folder and one executor."""

    spec: Spec  # with the extra repeats of results/{sweep}/extra_repeats.yaml
    planned: tuple[PlannedRun, ...]  # every run, blocked ones included, in the spec's order
    paths: SweepPaths  # results/{sweep}
    spent: Mapping[str, float]  # what the sweep's finished runs took (plan/cost.py spent_of)

    @property
    def submitted(self) -> list[PlannedRun]:
        return submitted(self.planned)


def plan_for(spec_path: str | Path, results: str | Path, cluster: str | None = None) -> SweepPlan:
    """Load, extend, plan and check a sweep; raises SpecError (the spec, or a limit the plan passes) or RepeatsError
    (results/{sweep}/extra_repeats.yaml).

    `cluster`: the executor the workflow uses (`--config cluster=`, the Slurm profile's), else the spec's; a local
    one on a machine without CUDA blocks the runs that need a device, except those the results folder holds."""
    spec = load_spec(spec_path)
    spec = apply_extra(spec, results)  # a side file naming cells this sweep lacks is refused
    paths = SweepPaths(results, spec.name)
    planned = tuple(plan_sweep(spec, cluster, paths))
    spent = spent_of(paths)  # the rest's estimates follow what the finished runs took
    check_plan(spec, planned, spent)  # beyond the time limit, over the GPU-hour budget, over max_runs
    return SweepPlan(spec, planned, paths, spent)


def write_plan_files(sweep: SweepPlan, plan_out: str | Path) -> None:
    """The plan rule: this invocation's plan into plan.parquet."""
    write_plan(sweep.spec, sweep.planned, plan_out)
