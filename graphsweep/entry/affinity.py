"""CPU affinity of a training rank (spec `quiet.pin_cpus`): the thread that launches the GPU work gets a core of its
own, the dataloader's worker processes another, every other thread of the rank the rest of its cores.

A launch-bound step is as fast as the one Python thread that launches its kernels. Left to the scheduler, that
thread shares and changes cores with the rank's other threads (the pin-memory thread, NCCL's, autograd's), its
dataloader workers and whatever else runs on the node, and its step time wanders with them (docs/performance.md
"Quieter jobs" has the H200 figures). Both arms of a cell are pinned the same way (the workload sets
GRAPHSWEEP_PIN_CPUS in both commands' environment), and the job's log says where each went.

The cores are the rank's share of what the job may use (GRAPHSWEEP_CPUS when set, a cpulist such as 0-11, for a
machine whose other cores run the controller; else os.sched_getaffinity: Slurm's --cpu-bind, a container's cpuset,
or the whole machine), split evenly among the node's ranks (LOCAL_WORLD_SIZE) in order. Linux only; where
affinity cannot be set, nothing is pinned and the line says why. Standard library only: it runs inside the job.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from graphsweep import logformat as lf

ENV = "GRAPHSWEEP_PIN_CPUS"  # "1": pin (the workload sets it for both arms of a quiet sweep)
CPUS_ENV = "GRAPHSWEEP_CPUS"  # the cores the job may use, as a cpulist ("0-11"), where no scheduler gives it a set


@dataclass(frozen=True)
class Pinning:
    """Where a rank's threads and processes go."""

    main: int  # the core of the thread that runs the training loop (launches the kernels)
    others: tuple[int, ...]  # the rank's other threads
    workers: tuple[int, ...]  # its dataloader worker processes

    def describe(self) -> str:
        return (f"main thread on core {self.main}, other threads on {_span(self.others)}, dataloader workers on "
                f"{_span(self.workers)}")


def _span(cores: tuple[int, ...]) -> str:
    if not cores:
        return "none"
    if list(cores) == list(range(cores[0], cores[-1] + 1)) and len(cores) > 2:
        return f"cores {cores[0]}-{cores[-1]}"
    return "cores " + ",".join(map(str, cores))


def plan(allowed: list[int], local_rank: int = 0, local_ranks: int = 1) -> Pinning | None:
    """The rank's share of `allowed`: split in order among the node's ranks; its last core for the dataloader workers,
    its second for the main thread (the first of a machine often serves interrupts), the rest for the other threads.
    None with fewer than 3 cores for the rank (no core to spare: pinning would only crowd the main thread)."""
    cores = sorted(allowed)
    share = len(cores) // max(1, local_ranks)
    mine = cores[local_rank * share:(local_rank + 1) * share]
    if len(mine) < 3:
        return None
    main = mine[1] if len(mine) >= 4 else mine[0]
    return Pinning(main, tuple(c for c in mine[:-1] if c != main), (mine[-1],))


def cpulist(text: str) -> list[int]:
    """Cores of a Linux cpulist ("0-3,8,10-11"); [] for an empty or malformed one."""
    out: list[int] = []
    try:
        for part in text.split(","):
            if part.strip():
                lo, _, hi = part.strip().partition("-")
                out += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        return []
    return sorted(set(out))


def wanted(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return environ.get(ENV) == "1"


def start() -> Pinning | None:
    """At the rank's start, before threads exist: the whole process on its other cores (threads created from now on
    inherit that); the main thread moves to its own core once training runs (`settle`)."""
    if not wanted() or not hasattr(os, "sched_setaffinity"):
        return None
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("SLURM_NTASKS_PER_NODE", "1")) or 1)
    given = cpulist(os.environ.get(CPUS_ENV, ""))
    pinning = plan(sorted(given or os.sched_getaffinity(0)), local_rank, local_ranks)
    if pinning is not None:
        try:
            os.sched_setaffinity(0, pinning.others)
        except OSError:
            return None
    return pinning


def settle(pinning: Pinning | None) -> str:
    """Once the training loop runs (its threads and dataloader workers exist): every thread of the process but the
    main one on the other cores, the main thread on its own, each child process (the dataloader's workers) on the
    workers' cores. The log line that says so (or why nothing was pinned)."""
    if pinning is None:
        why = "not asked" if not wanted() else "fewer than 3 cores for this rank, or no sched_setaffinity"
        return lf.line(f"cpu affinity: not pinned ({why})")
    main_tid = threading.main_thread().native_id
    threads = 0
    for task in Path("/proc/self/task").iterdir():
        tid = int(task.name)
        try:
            os.sched_setaffinity(tid, (pinning.main,) if tid == main_tid else pinning.others)
            threads += tid != main_tid
        except OSError:
            continue  # a thread that ended meanwhile
    workers = 0
    for child in _children():
        try:
            os.sched_setaffinity(child, pinning.workers)
            workers += 1
        except OSError:
            continue
    return lf.line(f"cpu affinity: {pinning.describe()} ({threads} other threads, {workers} worker processes)")


def release(allowed: set[int]) -> None:
    """Every thread and child process back on `allowed` (tools/noise_probe.py compares pinned with unpinned blocks)."""
    for task in Path("/proc/self/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), allowed)
        except OSError:
            continue
    for child in _children():
        try:
            os.sched_setaffinity(child, allowed)
        except OSError:
            continue


def _children() -> list[int]:
    """This process's child processes (Linux /proc/<pid>/task/*/children)."""
    out: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out
