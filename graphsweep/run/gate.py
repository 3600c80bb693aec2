"""The launch gate (spec `launch_gate: true`): a graph arm waits for its shape's eager runs and is skipped when their
GPU-busy diagnostic says no graph of this step can win beyond the margin.

A CUDA graph removes launch work from the host, not kernels from the GPU: a step whose GPU is busy for most of its
wall time cannot get faster than `eager step / GPU busy` (docs/results-h200.md section 5: every graph measured on
the H200 sat at or below it). When that ceiling is below 1 + margin, no run of the graph arm can read `speedup`:
the run rule runs no job for it and writes the decision, a `records.GateDecision`, as run.json's `gate` record; the
parser reads the run as blocked from that record (never from a log line), and it spends none of its GPU-hours.
"""

from __future__ import annotations

import datetime as dt
import socket
import statistics
from pathlib import Path
from typing import Sequence

from graphsweep import logformat as lf
from graphsweep.entry.gpu_busy import launch_bound
from graphsweep.fileio import write_json, write_text
from graphsweep.judge.centre import centre_ms
from graphsweep.store.runfiles import read_summary
from graphsweep.layout import RunDir
from graphsweep.records import GateDecision, LaunchPlan, RunRecord
from graphsweep.vocab import USABLE_OUTCOMES

LAUNCH_GATE = "launch-gate"  # run.json `executor` of a graph arm the gate skipped: no job ran


def decide(eager_summaries: Sequence[Path], margin: float) -> GateDecision:
    """The decision on one graph run from its shape's eager summaries: skip when their median ceiling is below
    1 + margin; run when no eager run measured it."""
    found = [read_summary(RunDir(Path(p).parent)) for p in eager_summaries]
    ok = [s for s in found if s.get("outcome") in USABLE_OUTCOMES and s.get("gpu_busy_ms") and s.get("step_ms_median")]
    if not ok:
        return GateDecision(None, None, 0, margin)
    busy = statistics.median(s["gpu_busy_ms"] for s in ok)
    step = centre_ms([s["step_ms_median"] for s in ok])  # the eager step the report prints
    share, ceiling = launch_bound(busy, step)
    return GateDecision(ceiling, share, len(ok), margin)


def record_skipped(run: RunDir, run_id: str, plan: LaunchPlan, decision: GateDecision) -> RunRecord:
    """A graph arm the gate skipped: its run.json says that no job ran (no GPU-second spent) and holds the decision
    (`gate`); its log only points there."""
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    write_text(run.log, lf.GATE_SKIPPED + "\n")
    record = RunRecord(run_id, LAUNCH_GATE, command=plan.shell(), host=socket.gethostname(), start_utc=now,
                       end_utc=now, wall_s=0.0, gpu_seconds=0.0, gate=decision)  # fmt: skip
    write_json(run.run_json, record.to_dict())
    return record
