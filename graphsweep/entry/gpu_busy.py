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

from collections.abc import Iterable
from typing import Any

from graphsweep import logformat as lf

FIRST = 2  # iteration 1 carries one-off set-up (allocator growth, first kernels, autotuning)


def window(warmup: int) -> tuple[int, int] | None:
    """Iterations profiled for a run with this cuda_graph_warmup_steps; None when warmup < 2 leaves none."""
    return (FIRST, warmup) if warmup >= FIRST else None


def launch_bound(busy_ms: float, step_ms: float) -> tuple[float, float]:
    """(share of the step the GPU is busy, ceiling step / busy that no graph of this step can beat), both clamped:
    the one formula the parser, the judge, the launch gate and `graphsweep status` use."""
    return min(1.0, busy_ms / step_ms), max(1.0, step_ms / busy_ms)


def device_spans(prof: Any) -> list[tuple[int, int]]:
    """[start, end) ns of every GPU activity a stopped torch.profiler.profile recorded: kernels, memcpy, memset.
    The GPU-side spans of `record_function` annotations are left out: they cover the gaps between kernels too."""
    import torch

    return [(e.start_ns(), e.end_ns()) for e in prof.profiler.kineto_results.events()
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
    returns the line to print (the parsing of the trace happens there too, outside every measured iteration).
    """

    def __init__(self, rank: int, warmup: int, enabled: bool) -> None:
        self.rank = rank
        self.window = window(warmup) if enabled else None
        self.enabled = enabled
        self._prof = None
        self._failed: str | None = None

    def before(self, iteration: int) -> None:
        if self.window is None or iteration != self.window[0] or self._failed:
            return
        try:
            import torch

            torch.cuda.synchronize()  # kernels of earlier iterations must not count
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            prof.start()
            self._prof = prof
        except Exception as exc:  # noqa: BLE001 - a diagnostic never takes a run
            self._failed = f"{type(exc).__name__}: {exc}"

    def after(self, iteration: int) -> str | None:
        if not self.enabled:
            return None
        if self.window is None:
            return lf.gpu_busy_unmeasured(self.rank, "warmup < 2 leaves no eager iteration before the capture "
                                          "iteration to profile") if iteration == 1 else None
        first, last = self.window
        if iteration != last:
            return None
        if self._failed or self._prof is None:
            return lf.gpu_busy_unmeasured(self.rank, self._failed or "the profiler did not start")
        try:
            import torch

            torch.cuda.synchronize()
            prof, self._prof = self._prof, None
            prof.stop()
            spans = device_spans(prof)
        except Exception as exc:  # noqa: BLE001
            return lf.gpu_busy_unmeasured(self.rank, f"{type(exc).__name__}: {exc}")
        if not spans:
            return lf.gpu_busy_unmeasured(self.rank, "the profiler recorded no GPU activity (CUPTI unavailable?)")
        n = last - first + 1
        return lf.gpu_busy(self.rank, first, last, union_ns(spans) / 1e6 / n, len(spans))
