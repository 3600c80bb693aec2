"""The launch-boundness diagnostic's job side: the profiled window, the interval union, and the line it prints
(the parser's side is tested on recorded real logs in tests/workflow/test_examples_h200.py)."""

from __future__ import annotations

import pytest

from graphsweep import logformat as lf
from graphsweep.entry import gpu_busy


def test_window_is_iterations_two_to_warmup_outside_every_steady_window() -> None:
    assert gpu_busy.window(3) == (2, 3)
    assert gpu_busy.window(4) == (2, 4)
    assert gpu_busy.window(2) == (2, 2)
    assert gpu_busy.window(1) is None  # iteration 1 is set-up; warmup+1 is the capture iteration
    assert gpu_busy.window(0) is None


@pytest.mark.parametrize(("spans", "total"), [
    ([], 0),
    ([(0, 10)], 10),
    ([(0, 10), (5, 15)], 15),  # two streams overlapping count once
    ([(20, 30), (0, 10)], 20),  # any order
    ([(0, 10), (2, 3), (10, 12)], 12),  # nested and touching
    ([(5, 5), (9, 4)], 0),  # empty or inverted records add nothing
])
def test_busy_time_is_the_union_of_gpu_activity(spans: list[tuple[int, int]], total: int) -> None:
    assert gpu_busy.union_ns(spans) == total


def test_the_line_round_trips_through_the_parsers_pattern() -> None:
    line = lf.gpu_busy(3, 2, 4, 41.3816, 1863)
    assert line == "[graphsweep] gpu busy: rank 3 iterations 2-4: 41.382 ms per iteration (1863 GPU activities, 3 iterations)"
    m = lf.RE_GPU_BUSY.search(b"[default0]:" + line.encode())
    assert m is not None and m.groups() == (b"3", b"2", b"4", b"41.382")
    miss = lf.gpu_busy_unmeasured(0, "the profiler recorded no GPU activity")
    assert lf.RE_GPU_BUSY.search(miss.encode()) is None
    assert lf.RE_GPU_BUSY_UNMEASURED.search(miss.encode()).group(2) == b"the profiler recorded no GPU activity"


def test_a_probe_off_or_without_a_window_never_touches_torch() -> None:
    off = gpu_busy.BusyProbe(0, 3, enabled=False)
    off.before(2)
    assert [off.after(i) for i in range(1, 6)] == [[]] * 5
    short = gpu_busy.BusyProbe(0, 1, enabled=True)  # warmup 1: nothing to profile, and it says so once
    short.before(2)
    said = [short.after(i) for i in range(1, 6)]
    assert len(said[0]) == 1 and "not measured: warmup < 2" in said[0][0] and said[1:] == [[]] * 4


def test_share_and_ceiling_come_from_one_formula_and_are_clamped() -> None:
    assert gpu_busy.launch_bound(42.32, 240.4) == pytest.approx((42.32 / 240.4, 240.4 / 42.32))
    # a profiled window a little longer than the steady median (clock noise): never a share above 1 or a ceiling below 1
    assert gpu_busy.launch_bound(90.0, 86.5) == (1.0, 1.0)
