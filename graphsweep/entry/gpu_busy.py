"""How busy the GPU is during an eager step: the launch-boundness diagnostic, measured inside the training process.

The eager arm of every shape profiles a short window of its own iterations with ``torch.profiler`` (CUDA activity
only: CUPTI's kernel, memcpy and memset records, no CPU-side op recording) and prints one line per rank:

    [graphsweep] gpu busy: rank 0 iterations 2-3: 41.382 ms per iteration (1863 GPU activities, 2 iterations)

"busy" is the union of the GPU activity intervals (overlapping streams count once) divided by the iterations
profiled. A graph removes host time between kernels, not the kernels: ``eager step wall / busy`` is the most any
graph of this step can win, ``busy / wall`` the share of the step the GPU works (graphsweep/parse reads the line).

The window is iterations 2..warmup (``cuda_graph_warmup_steps``), ended before the capture iteration warmup+1:
iteration 1 carries one-off set-up, and the steady window starts at warmup+2 in every arm, so the profiler's own
host cost never lands in a measured iteration (the eager arm's kernels in iterations 2..warmup are those of every
later step). Standard library only at module level: the controller imports this module; torch is imported inside.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from graphsweep import logformat as lf
from graphsweep.entry import host_time

FIRST = 2  # iteration 1 carries one-off set-up (allocator growth, first kernels, autotuning)


def window(warmup: int) -> tuple[int, int] | None:
    """Iterations profiled for a run with this cuda_graph_warmup_steps; None when warmup < 2 leaves none."""
    return (FIRST, warmup) if warmup >= FIRST else None


def launch_bound(busy_ms: float, step_ms: float) -> tuple[float, float]:
    """(share of the step the GPU is busy, ceiling step / busy that no graph of this step can beat), both clamped:
    the one formula the parser, the judge, the launch gate and `graphsweep status` use."""
    return min(1.0, busy_ms / step_ms), max(1.0, step_ms / busy_ms)


def device_spans(events: Iterable[Any]) -> list[tuple[int, int]]:
    """[start, end) ns of every GPU activity among a stopped torch.profiler.profile's KinetoEvents
    (``prof.profiler.kineto_results.events()``): kernels, memcpy, memset. The GPU-side spans of `record_function`
    annotations are left out: they cover the gaps between kernels too."""
    import torch

    return [(e.start_ns(), e.end_ns()) for e in events
            if e.device_type() == torch.autograd.DeviceType.CUDA and not e.is_user_annotation()]


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length of the union of [start, end) intervals (overlapping streams count once)."""
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None:
        total += cur_end - cur_start
    return total


class BusyProbe:
    """Profile iterations first..last of this process; never raises into the training loop.

    ``before(i)`` at the start of iteration i and ``after(i)`` at its end; ``after(last)`` stops the profiler and
    returns the lines to print (the parsing of the trace happens there too, outside every measured iteration).
    With ``annotate`` (a function that opens the host-time regions and returns the function that closes them,
    graphsweep/entry/host_time.py) the same window also profiles CPU activity and adds the host-time line.
    """

    def __init__(self, rank: int, warmup: int, enabled: bool,
                 annotate: Callable[[], Callable[[], None]] | None = None, cuda: bool = True) -> None:
        self.rank = rank
        self.window = window(warmup) if enabled else None
        self.enabled = enabled
        self.annotate = annotate
        self.cuda = cuda
        self._prof = None
        self._undo: Callable[[], None] | None = None
        self._t0 = 0
        self._failed: str | None = None

    def _sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()  # kernels of earlier iterations must not count

    def before(self, iteration: int) -> None:
        if self.window is None or iteration != self.window[0] or self._failed:
            return
        try:
            import torch

            activities = [torch.profiler.ProfilerActivity.CUDA] if self.cuda else []
            if self.annotate is not None:
                activities.append(torch.profiler.ProfilerActivity.CPU)
                self._undo = self.annotate()
            self._sync()
            prof = torch.profiler.profile(activities=activities)
            prof.start()
            self._prof = prof
            self._t0 = time.perf_counter_ns()
        except Exception as exc:  # noqa: BLE001 - a diagnostic never takes a run
            self._failed = f"{type(exc).__name__}: {exc}"
            self._close()

    def _close(self) -> None:
        undo, self._undo = self._undo, None
        if undo is not None:
            try:
                undo()
            except Exception:  # noqa: BLE001
                pass

    def after(self, iteration: int) -> list[str]:
        if not self.enabled:
            return []
        if self.window is None:
            why = "warmup < 2 leaves no eager iteration before the capture iteration to profile"
            return self._unmeasured(why) if iteration == 1 else []
        first, last = self.window
        if iteration != last:
            return []
        if self._failed or self._prof is None:
            return self._unmeasured(self._failed or "the profiler did not start")
        try:
            self._sync()
            wall_ns = time.perf_counter_ns() - self._t0
            prof, self._prof = self._prof, None
            prof.stop()
            self._close()
            events = list(prof.profiler.kineto_results.events())
        except Exception as exc:  # noqa: BLE001
            self._close()
            return self._unmeasured(f"{type(exc).__name__}: {exc}")
        n = last - first + 1
        return [line for line in (self._busy_line(events, first, last, n), self._host_line(events, wall_ns, first, last, n))
                if line]

    def _unmeasured(self, why: str) -> list[str]:
        lines = [lf.gpu_busy_unmeasured(self.rank, why)] if self.cuda else []
        if self.annotate is not None:
            lines.append(lf.host_time_unmeasured(self.rank, why))
        return lines

    def _busy_line(self, events: list[Any], first: int, last: int, n: int) -> str | None:
        if not self.cuda:
            return None
        try:
            spans = device_spans(events)
        except Exception as exc:  # noqa: BLE001
            return lf.gpu_busy_unmeasured(self.rank, f"{type(exc).__name__}: {exc}")
        if not spans:
            return lf.gpu_busy_unmeasured(self.rank, "the profiler recorded no GPU activity (CUPTI unavailable?)")
        return lf.gpu_busy(self.rank, first, last, union_ns(spans) / 1e6 / n, len(spans))

    def _host_line(self, events: list[Any], wall_ns: int, first: int, last: int, n: int) -> str | None:
        if self.annotate is None:
            return None
        try:
            ms = host_time.per_iteration(host_time.region_times(events), wall_ns, n)
        except Exception as exc:  # noqa: BLE001
            return lf.host_time_unmeasured(self.rank, f"{type(exc).__name__}: {exc}")
        return lf.host_time(self.rank, first, last, wall_ns / 1e6 / n, ms)
