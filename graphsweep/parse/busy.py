"""The launch-boundness diagnostic of a run, from its `[graphsweep] gpu busy:` lines (graphsweep/entry/gpu_busy.py).

An eager step's wall time is the GPU's busy time plus the time the GPU waits for the host. A CUDA graph removes
launch work from the host, not kernels from the GPU, so ``wall / busy`` bounds what any graph of that step can win
(the ceiling) and ``busy / wall`` is the share of the step the GPU works. Busy is measured in iterations
2..warmup of the eager arm (outside the steady window); wall is the steady window's median step time.
"""

from __future__ import annotations

from graphsweep.entry.gpu_busy import launch_bound
from graphsweep.parse.records import Evidence, RunSummary


def launch_figures(s: RunSummary, ev: Evidence) -> None:
    """Set the run's GPU-busy figures (max over ranks: the slowest GPU bounds the step)."""
    s.gpu_busy_ms = ev.gpu_busy_ms
    s.gpu_busy_note = ev.gpu_busy_note if ev.gpu_busy_ms is None else None
    if ev.gpu_busy_ms and s.step_ms_median:
        s.gpu_busy_share, s.graph_ceiling = launch_bound(ev.gpu_busy_ms, s.step_ms_median)
