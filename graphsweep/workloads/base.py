"""The workload protocol: what the planner asks of every kind of training a sweep can run.

A workload is a plug-in below the spec: it knows its own settings (`validate`), the constraints its runs can break
before a job (`preflight`), the exact command of a run (`launch_plan`), what that command sets for its graph that the
eager command does not (`graph_switch`) and what a run costs (`estimate`). It sees
runs (graphsweep.records.RunSpec), never the whole sweep, so a new workload is one module and one registry line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol

from graphsweep.constraints.runtime import NO_CUDA
from graphsweep.records import GraphOverrides, LaunchPlan, RunSpec, Violation


class Workload(Protocol):
    KIND: str  # the spec's workload.kind

    def validate(self, raw: Mapping[str, Any], path: str | Path) -> None:
        """Raise SpecError (file, key, value) for settings this workload cannot run; called when a spec loads."""

    def preflight(self, run: RunSpec) -> list[Violation]:
        """The constraints this run breaks (no GPU, no training framework imported)."""

    def launch_plan(self, run: RunSpec) -> LaunchPlan:
        """The exact command, environment and GPU layout of this run's job."""

    def graph_switch(self, run: RunSpec) -> GraphOverrides | None:
        """What this run's command sets that the eager command of its shape does not (None for an eager run): the
        overrides or flags a user pastes to get this graph, from the settings launch_plan makes the command of."""

    def estimate(self, run: RunSpec) -> float:
        """GPU-seconds the run asks for (the dry run's cost; blocked runs report it as saved)."""

    # Optional: `needs_cuda(run) -> bool`, whether the run cannot run without a CUDA device. A local executor on a
    # machine without one blocks such runs at plan time (plan/planner.py, `no_cuda_here` below) instead of starting
    # jobs that only say so.


@dataclass(frozen=True)
class RunCost:
    """What one run of a workload kind costs besides its iterations, in seconds of wall time (GPU-seconds per GPU),
    from the committed real runs of that kind (benchmarks/estimates.py prints them; each sweep counts once): the
    median over the sweeps of start-up, teardown and capture, the mean of their loop's seconds per iteration
    (`step_s`, where the workload has no better guess for a run)."""

    startup_s: float  # job start to the first iteration: interpreter, imports, CUDA, model build, data
    teardown_s: float  # the last iteration's end to the job's end
    capture_s: float  # what a graph arm's warmup and capture add to the iterations before its steady window
    step_s: float = 0.0

    def seconds(self, iterations: int, graph: bool, step_s: float | None = None) -> float:
        """The wall time of one run of `iterations` iterations."""
        step = self.step_s if step_s is None else step_s
        return self.startup_s + iterations * step + (self.capture_s if graph else 0.0) + self.teardown_s


# The NVIDIA kernel driver's file: torch.cuda.is_available() is False on a machine without it, whatever is installed.
NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")
NO_CUDA_HERE = NO_CUDA.id  # plan.parquet rule_id of a run blocked at plan time (planner.plan_sweep)


def cuda_here() -> bool:
    """Whether a job started on this machine could see a CUDA device: False only where that is certain (no NVIDIA
    driver, or CUDA_VISIBLE_DEVICES hides every device), so a run is never blocked on a machine that has one."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return NVIDIA_DRIVER.exists()


def no_cuda_here(cluster: str, run: RunSpec) -> Violation:
    """Why a run that needs a CUDA device is not started by the `cluster` executor on this machine (plan time, 0
    GPU-seconds): a graph arm for its graphs; an eager arm for its training (a workload that trains on CUDA only)."""
    what = "CUDA graphs need" if run.variant.is_graph else f"{run.workload['kind']} training needs"
    arm = "graph arm" if run.variant.is_graph else "eager arm"
    return Violation(NO_CUDA_HERE, f"{what} a CUDA device; this machine has none (no NVIDIA driver) and the "
                     f"{cluster} executor runs its jobs here: no job is started for this {arm}",
                     f"graphsweep: plan time, {NVIDIA_DRIVER} missing or CUDA_VISIBLE_DEVICES empty")
