"""The decision loop's rules on judged cells (graphsweep/judge/loop.py): decided, dropped, live, out of budget."""

from __future__ import annotations

from graphsweep.judge import loop
from graphsweep.judge.loop import Judged
from graphsweep.vocab import (
    BLOCKED, INCONCLUSIVE, LOOP_BUDGET, LOOP_CONTROL, LOOP_DECIDED, LOOP_DROPPED_LEADER, LOOP_DROPPED_MARGIN,
    LOOP_LIVE, LOOP_UNTIMED, NEUTRAL, SPEEDUP,
)  # fmt: skip

M, A = 0.02, 0.05


def states(*cells: str, control: str | None = "s.aa") -> dict[str, loop.CellState]:
    names = {c: ("s", False) for c in cells}
    if control:
        names[control] = ("s", True)
    return loop.new_states(names)


def test_a_decided_speedup_stops_and_its_shape_goes_on_for_the_live_cell():
    st = states("s.a", "s.b")
    loop.step(st, {"s.a": Judged(SPEEDUP, 1.4, 1.2, 1.6, 0.001), "s.b": Judged(INCONCLUSIVE, 1.3, 0.9, 1.7, 0.3),
                   "s.aa": Judged(INCONCLUSIVE, 1.0, 0.8, 1.2, 0.9)}, 1, margin=M, alpha=A)
    assert st["s.a"].status == LOOP_DECIDED
    assert st["s.b"].status == LOOP_LIVE  # its interval reaches above the leader's lower end: it may still lead
    assert st["s.aa"].status == LOOP_CONTROL
    assert loop.judged_now(st) == ["s.b", "s.aa"]  # the live cell and the A/A control of its shape


def test_a_cell_below_the_margin_is_dropped_as_not_faster():
    st = states("s.a")
    loop.step(st, {"s.a": Judged(INCONCLUSIVE, 0.97, 0.94, 1.01, 0.4)}, 1, margin=M, alpha=A)
    assert st["s.a"].status == LOOP_DROPPED_MARGIN
    assert loop.live_shapes(st) == set()


def test_a_cell_below_the_leader_is_dropped():
    st = states("s.a", "s.b", control=None)
    loop.step(st, {"s.a": Judged(INCONCLUSIVE, 2.0, 1.7, 2.4, 0.2), "s.b": Judged(INCONCLUSIVE, 1.3, 1.1, 1.6, 0.3)},
              1, margin=M, alpha=A)
    assert st["s.b"].status == LOOP_DROPPED_LEADER
    assert st["s.a"].status == LOOP_LIVE


def test_a_neutral_interval_is_decided_and_cells_that_cannot_be_timed_stop():
    st = states("s.a", "s.b", control=None)
    loop.step(st, {"s.a": Judged(NEUTRAL, 1.0, 0.99, 1.01, 1.0), "s.b": Judged(BLOCKED)}, 1, margin=M, alpha=A)
    assert st["s.a"].status == LOOP_DECIDED and st["s.b"].status == LOOP_UNTIMED


def test_the_family_gate_keeps_a_cell_live_until_its_q_is_below_alpha():
    st = states("s.a", "s.b", "s.c", control=None)
    # one speedup at p 0.04 among two cells with nothing: BH q = 0.12, not yet a decision
    loop.step(st, {"s.a": Judged(SPEEDUP, 1.2, 1.03, 1.4, 0.04), "s.b": Judged(INCONCLUSIVE, 1.0, 0.7, 1.4, 0.9),
                   "s.c": Judged(INCONCLUSIVE, 1.0, 0.7, 1.5, 0.8)}, 1, margin=M, alpha=A)
    assert st["s.a"].status == LOOP_LIVE and st["s.a"].q > A
    # the next look: its repeated p falls, the smallest one counts for the gate
    loop.step(st, {"s.a": Judged(SPEEDUP, 1.2, 1.08, 1.33, 0.004), "s.b": Judged(INCONCLUSIVE, 1.0, 0.8, 1.3, 0.9),
                   "s.c": Judged(INCONCLUSIVE, 1.0, 0.8, 1.3, 0.9)}, 2, margin=M, alpha=A)
    assert st["s.a"].status == LOOP_DECIDED and st["s.a"].p_min == 0.004


def test_cells_still_live_when_the_loop_ends_are_out_of_budget():
    st = states("s.a")
    loop.step(st, {"s.a": Judged(INCONCLUSIVE, 1.1, 0.9, 1.3, 0.3)}, 1, margin=M, alpha=A)
    loop.close(st)
    assert st["s.a"].status == LOOP_BUDGET and st["s.aa"].status == LOOP_CONTROL
