"""The launch-boundness diagnostic of a run, from its `[graphsweep] gpu busy:` lines (graphsweep/entry/gpu_busy.py),
and where its host time goes, from its `[graphsweep] host time:` lines (graphsweep/entry/host_time.py).

An eager step's wall time is the GPU's busy time plus the time the GPU waits for the host. A CUDA graph removes
launch work from the host, not kernels from the GPU, so ``wall / busy`` bounds what any graph of that step can win
(the ceiling) and ``busy / wall`` is the share of the step the GPU works. Busy is measured in iterations
2..warmup of the eager arm (outside the steady window); wall is the steady window's median step time.
"""

from __future__ import annotations

from graphsweep import logformat as lf
from graphsweep.entry import host_time
from graphsweep.entry.gpu_busy import launch_bound
from graphsweep.parse.numbers import to_float
from graphsweep.parse.records import Evidence, RunSummary


def launch_figures(s: RunSummary, ev: Evidence) -> None:
    """Set the run's GPU-busy figures (max over ranks: the slowest GPU bounds the step) and its host time by region
    (rank 0's line, whole: a region's maximum over ranks would mix ranks, and its shares would not add up to the
    step; the ranks of one step wait for each other, so their steps agree)."""
    s.gpu_busy_ms = ev.gpu_busy_ms
    s.gpu_busy_note = ev.gpu_busy_note if ev.gpu_busy_ms is None else None
    if ev.gpu_busy_ms and s.step_ms_median:
        s.gpu_busy_share, s.graph_ceiling = launch_bound(ev.gpu_busy_ms, s.step_ms_median)
    if ev.host_time:
        s.host_time_rank = min(ev.host_time)
        s.host_step_ms, s.host_regions = ev.host_time[s.host_time_rank]
        s.host_time_ranks = len(ev.host_time)
    else:
        s.host_time_note = ev.host_time_note


Region = tuple[float, float | None, float | None]  # host ms, of which waiting on the GPU, profiler events (per iteration)


def host_time_lines(raw: bytes) -> tuple[list[tuple[int, float, dict[str, Region]]], str | None]:
    """The `[graphsweep] host time:` lines on one physical line (ranks' lines can be glued together): (rank, host ms
    per iteration, {region: (ms, wait ms, events)} of host_time.REGIONS) of each measured one, and the reason of an
    unmeasured one. Lines of graphsweep ad664cb (2026-12-02 06:40) print `name ms` alone: wait and events None."""
    measured, note = [], None
    for part in raw.split(lf.HOST_TIME_B)[1:]:
        line = lf.HOST_TIME_B + part
        if m := lf.RE_HOST_TIME.search(line):
            regions = {k.decode(): (to_float(ms), _num(wait), _num(events))
                       for k, ms, wait, events in lf.RE_HOST_REGION.findall(m.group(5))
                       if k.decode() in host_time.REGIONS}
            measured.append((int(m.group(1)), to_float(m.group(4)), regions))
        elif note is None and (m := lf.RE_HOST_TIME_UNMEASURED.search(line)):
            note = m.group(2).decode("utf-8", "replace").strip()
    return measured, note


def _num(text: bytes) -> float | None:
    return to_float(text) if text else None
