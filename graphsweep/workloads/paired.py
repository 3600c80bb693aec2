"""Paired runs as a workload wrapper: both arms of a cell in one job on the same GPUs, in ABBA order (`pairing: true`).

A pair job runs four segments, each a complete training process of the wrapped workload: A = the eager arm, B = the
graph arm (or the eager control of an A/A cell). Odd repeats run A1 B1 B2 A2, even repeats B1 A1 A2 B2: ABBA
cancels a linear drift within the job (thermal, clocks, a neighbour's load), and alternating the order across
repeats cancels what the first segment of a job pays alone (cold page cache, compile caches, the container's start).
The driver that runs the segments inside the job is graphsweep/entry/abba.py; graphsweep/parse/pairs.py splits its
log back into segments and arms.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from graphsweep.records import GraphOverrides, LaunchPlan, RunSpec, Violation
from graphsweep.vocab import ABBA_DRIVER, EAGER, GRAPH, PYTHON
from graphsweep.workloads.base import Workload

ORDERS = {1: ("A1", "B1", "B2", "A2"), 0: ("B1", "A1", "A2", "B2")}  # by repeat parity


def order_for(repeat: int) -> tuple[str, ...]:
    return ORDERS[repeat % 2]


def pair_plan(eager: LaunchPlan, other: LaunchPlan, repeat: int, arms: tuple[str, str] = (EAGER, GRAPH)) -> LaunchPlan:
    """The pair job's plan: the driver as the command, the allocation of the arms (they share one layout)."""
    layout = lambda p: (p.nodes, p.gpus_per_node, p.tasks_per_node)  # noqa: E731
    if layout(eager) != layout(other):
        raise ValueError("pairing: the eager and graph arms need the same GPU layout to share one allocation")
    order = order_for(repeat)
    plans = json.dumps({"A": eager.to_dict(), "B": other.to_dict()}, sort_keys=True)
    # the driver runs in the job's own interpreter (vocab.PYTHON), on the host, never in the user's container
    argv = [PYTHON, "-m", ABBA_DRIVER, "--order", ",".join(order), "--arms", ",".join(arms),
            "--plans", plans]
    # srun as the arms have it: the allocation then gets one task per GPU and the driver runs in the batch step
    # (run/submit.py slurm_parameters); the driver starts each segment as its own srun step (entry/job.py job_argv)
    return LaunchPlan(argv=argv, env=dict(eager.env), gpus=eager.gpus, nodes=eager.nodes,
                      gpus_per_node=eager.gpus_per_node, tasks_per_node=eager.tasks_per_node,
                      overrides=dict(other.overrides), srun=eager.srun, srun_args=[], seed=eager.seed,
                      arms={"A": eager, "B": other}, order=order)  # fmt: skip


class Paired:
    """A workload whose runs are pair jobs of another workload's arms."""

    def __init__(self, inner: Workload):
        self.inner = inner
        self.KIND = inner.KIND

    def validate(self, raw: Mapping[str, Any], path: str | Path) -> None:
        self.inner.validate(raw, path)

    def preflight(self, run: RunSpec) -> list[Violation]:
        return [v for arm in run.pair_arms() for v in self.inner.preflight(arm)]  # either arm's rule blocks the job

    def launch_plan(self, run: RunSpec) -> LaunchPlan:
        eager, other = run.pair_arms()
        return pair_plan(self.inner.launch_plan(eager), self.inner.launch_plan(other), run.repeat,
                         arms=(eager.arm, other.arm))

    def graph_switch(self, run: RunSpec) -> GraphOverrides | None:
        return self.inner.graph_switch(run.pair_arms()[1])  # the graph arm's; an A/A pair's control arm has none

    def estimate(self, run: RunSpec) -> float:
        return sum(2 * self.inner.estimate(arm) for arm in run.pair_arms())  # four segments: each arm twice

    def needs_cuda(self, run: RunSpec) -> bool:
        needs = getattr(self.inner, "needs_cuda", None)
        return needs is not None and any(needs(arm) for arm in run.pair_arms())
