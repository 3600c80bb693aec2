"""Which workload runs a run: the registry of workload kinds, and the paired wrapper for pair jobs."""

from __future__ import annotations

from graphsweep.records import LaunchPlan, RunSpec, Violation
from graphsweep.workloads import builtin, megatron_bridge
from graphsweep.workloads.base import Workload
from graphsweep.workloads.paired import Paired

WORKLOADS: dict[str, Workload] = {builtin.KIND: builtin, megatron_bridge.KIND: megatron_bridge}  # type: ignore[dict-item]


def workload_for(kind: str) -> Workload:
    try:
        return WORKLOADS[kind]
    except KeyError:
        raise ValueError(f"unknown workload kind {kind!r}; known: {', '.join(WORKLOADS)}") from None


def for_run(run: RunSpec) -> Workload:
    """The workload of one run; a pair job's is the paired wrapper around its arms' workload."""
    inner = workload_for(run.workload["kind"])
    return Paired(inner) if run.is_pair else inner


def launch_plan(run: RunSpec) -> LaunchPlan:
    """The exact command of one run, by its workload."""
    return for_run(run).launch_plan(run)


def preflight(run: RunSpec) -> list[Violation]:
    """The constraints one run breaks, by its workload."""
    return for_run(run).preflight(run)
