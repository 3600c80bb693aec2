"""The launch gate (spec `launch_gate: true`): a graph arm waits for its shape's eager runs and is skipped when their
GPU-busy diagnostic says no graph of this step can win beyond the margin.

A CUDA graph removes launch work from the host, not kernels from the GPU: a step whose GPU is busy for most of its
wall time cannot get faster than `eager step / GPU busy` (docs/results-h200.md section 5: every graph measured on
the H200 sat at or below it). When that ceiling is below 1 + margin, no run of the graph arm can read `speedup`:
the gate records it as blocked, with the figures, and spends none of its GPU-hours.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from graphsweep import logformat as lf
from graphsweep.entry.gpu_busy import launch_bound
from graphsweep.store.readback import read_summary
from graphsweep.vocab import USABLE_OUTCOMES, RunDir


@dataclass(frozen=True)
class GateDecision:
    skip: bool
    ceiling: float | None  # eager step / GPU busy, median over the eager runs that measured it
    busy_share: float | None
    runs: int  # eager runs that measured it
    margin: float

    def line(self) -> str:
        """The log line of a skipped run (graphsweep/parse reads it as blocked, class launch_gate)."""
        return (f"{lf.LAUNCH_GATE}the GPU is busy {self.busy_share:.0%} of an eager step ({self.runs} eager run(s)): "
                f"no graph of this step can be faster than {self.ceiling:.3f}x, inside the margin 1 + {self.margin:g}; "
                "the graph arm was not run (spec launch_gate)")


def decide(eager_summaries: Sequence[Path], margin: float) -> GateDecision:
    """Skip when the eager runs' median ceiling is below 1 + margin; run when no eager run measured it."""
    found = [read_summary(RunDir(Path(p).parent)) for p in eager_summaries]
    ok = [s for s in found if s.get("outcome") in USABLE_OUTCOMES and s.get("gpu_busy_ms") and s.get("step_ms_median")]
    if not ok:
        return GateDecision(False, None, None, 0, margin)
    busy = statistics.median(s["gpu_busy_ms"] for s in ok)
    step = statistics.median(s["step_ms_median"] for s in ok)
    share, ceiling = launch_bound(busy, step)
    return GateDecision(ceiling < 1 + margin, ceiling, share, len(ok), margin)
