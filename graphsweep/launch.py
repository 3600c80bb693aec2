"""From a run to the exact command the job executes, and the preflight verdict of that run.

Each workload turns a RunSpec into a LaunchPlan: argv, environment, GPU layout. The eager and graph arms of a
shape share everything but the graph switch (same environment, same settings).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from graphsweep.spec import RunSpec


@dataclass(frozen=True)
class Violation:
    """A preflight rule that rejects a run before it costs a GPU second."""

    rule: str  # stable id, e.g. "full_iteration_nan_check"
    message: str  # the text Megatron prints (or ours where Megatron has none)
    source: str  # where the rule comes from (file:line @ version), or "graphsweep"


@dataclass(frozen=True)
class LaunchPlan:
    """What one job runs."""

    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)
    gpus: int = 1
    nodes: int = 1
    gpus_per_node: int = 1
    tasks_per_node: int = 1
    overrides: Mapping[str, Any] = field(default_factory=dict)  # megatron_bridge: the Hydra overrides of this run
    srun: bool = False  # start the training as its own srun step (multi-task / container launches)
    srun_args: list[str] = field(default_factory=list)

    def shell(self) -> str:
        """The command as a user would paste it into a shell: every value quoted."""
        env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(self.env.items()))
        cmd = shlex.join(self.argv)
        if self.srun:
            cmd = shlex.join(["srun", *self.srun_args]) + " " + cmd
        return f"{env} {cmd}".strip()


def builtin_plan(run: RunSpec, python: str | None = None) -> LaunchPlan:
    """The builtin PyTorch GPT (graphsweep/workload.py)."""
    s = run.settings
    argv = [
        python or sys.executable,
        "-m",
        "graphsweep.workload",
        "--hidden",
        str(s["hidden"]),
        "--layers",
        str(s["layers"]),
        "--heads",
        str(s["heads"]),
        "--seq-length",
        str(s["seq_length"]),
        "--micro-batch",
        str(s["micro_batch"]),
        "--warmup",
        str(run.warmup),
        "--iters",
        str(run.total_iterations),
        "--seed",
        str(run.repeat),
    ]
    if "vocab" in s:
        argv += ["--vocab", str(s["vocab"])]
    if "dtype" in s:
        argv += ["--dtype", str(s["dtype"])]
    if "mem_fraction" in s:
        argv += ["--mem-fraction", str(s["mem_fraction"])]
    v = run.variant
    if v.impl == "none":
        argv += ["--variant", "eager"]
    elif v.is_full_iteration:
        argv += ["--variant", "full_iteration"]
    else:
        argv += ["--variant", "scoped", "--scope", ",".join(v.scope)]
    env = {str(k): str(val) for k, val in run.workload.get("env", {}).items()}
    return LaunchPlan(argv=argv, env=env, gpus=1, nodes=1, gpus_per_node=1)


def launch_plan(run: RunSpec) -> LaunchPlan:
    if run.is_pair:  # both arms in one job, ABBA order (graphsweep/abba.py)
        from graphsweep import abba

        eager, other = run.pair_arms()
        return abba.pair_plan(launch_plan(eager), launch_plan(other), run.repeat, arms=(eager.arm, other.arm))
    kind = run.workload["kind"]
    if kind == "builtin":
        return builtin_plan(run)
    if kind == "megatron_bridge":
        from graphsweep import megatron

        return megatron.launch_plan(run)
    raise ValueError(f"unknown workload kind {kind!r}")


def preflight(run: RunSpec) -> list[Violation]:
    """Rules that block a run before submission. The eager arm is checked like any other."""
    if run.is_pair:  # a pair job runs both arms: either arm's rule blocks it
        return [v for arm in run.pair_arms() for v in preflight(arm)]
    kind = run.workload["kind"]
    if kind == "megatron_bridge":
        from graphsweep import megatron

        return megatron.preflight_run(run)
    return []
