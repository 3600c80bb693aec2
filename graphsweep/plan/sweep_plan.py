"""The one plan of a sweep: what the workflow (rules/common.smk), `graphsweep plan` and `graphsweep check-spec` all
build, by the same steps, so that the three never disagree on a run.

    plan_for(spec_path, results, cluster)  the spec, with the repeats more-repeats asked for, planned and checked
    stale_configs(plan)                     the runs whose config.yaml the plan job writes (missing, or changed)
    write_plan_files(plan, ...)             the plan job: plan.parquet and those config.yaml files
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from graphsweep.layout import RunDir, SweepPaths
from graphsweep.plan.cost import spent_of
from graphsweep.plan.planner import PlannedRun, check_plan, plan_sweep, submitted, write_plan, write_run_config
from graphsweep.plan.repeats import apply_extra
from graphsweep.store.runfiles import read_yaml
from graphsweep.sweepspec.load import load_spec
from graphsweep.sweepspec.sweep import Spec
from graphsweep.fileio import UnusableFile


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

    def digest(self) -> str:
        """What the plan job writes, in one string (the plan rule's params: a changed command, a run newly blocked or
        a new estimate writes the plan again, and the config.yaml of exactly the runs whose config changed)."""
        rows = [(p.run.run_id, p.status, [v.rule for v in p.violations], p.est_gpu_seconds,
                 p.config() if p.submitted else None) for p in self.planned]
        return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


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


def _holds(path: Path, config: Mapping[str, Any]) -> bool:
    """Whether config.yaml says what the plan says (by content: a file of an older graphsweep, formatted otherwise,
    still holds its run's config)."""
    if not path.is_file():
        return False
    try:
        return read_yaml(path) == config
    except UnusableFile:  # rewritten by the plan job (readback.check_sweep names it before any job)
        return False


def stale_configs(sweep: SweepPlan) -> list[str]:
    """The submitted runs whose config.yaml is missing or holds another config than this plan's: the plan job's
    outputs. Every other run keeps its file and its mtime, so no finished run is queued again; a run whose config
    changed is queued again through its new config.yaml (rules/plan.smk)."""
    return [p.run.run_id for p in sweep.submitted if not _holds(sweep.paths.run(p.run.run_id).config, p.config())]


def write_plan_files(sweep: SweepPlan, plan_out: str | Path, configs: Sequence[RunDir] = (),
                     keep: Sequence[str] = ()) -> None:
    """The plan job: this invocation's plan into plan.parquet, and the config.yaml of the `configs` run folders (the
    stale ones) whose content differs from the plan, but those of the runs in `keep` (kept as their jobs ran them);
    an unchanged one is left as it is, its mtime too."""
    by_id = {p.run.run_id: p for p in sweep.submitted}
    for run in configs:
        planned = by_id[run.run_id]
        if run.run_id not in keep and not _holds(run.config, planned.config()):
            write_run_config(planned, run)
    write_plan(sweep.spec, sweep.planned, plan_out)
