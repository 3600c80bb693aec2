"""The decision loop's statistics (graphsweep/judge/sequential.py, interval.Look): boundaries that keep alpha over
every look, repeated p-values that read them backwards, intervals that widen with the looks planned."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphsweep.judge import interval as iv
from graphsweep.judge import sequential as seq
from graphsweep.judge.design import SPENDING
from graphsweep.vocab import INCONCLUSIVE, SPEEDUP


def crossing_rate(design: seq.Design, alpha: float, draws: int = 200_000, seed: int = 0) -> float:
    """P(|Z_k| >= c_k at some look) for a Brownian motion with no drift, by simulation."""
    c = np.array(seq.boundaries(design, alpha))
    t = np.array(design.fractions())
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((draws, len(t))) * np.sqrt(np.diff(np.r_[0.0, t]))
    z = np.cumsum(steps, axis=1) / np.sqrt(t)
    return float((np.abs(z) >= c).any(axis=1).mean())


@pytest.mark.parametrize("spending", SPENDING)
def test_the_boundaries_spend_exactly_alpha_over_all_looks(spending):
    design = seq.Design(3, 1, 16, spending)
    rate = crossing_rate(design, 0.05)
    assert rate == pytest.approx(0.05, abs=0.003)  # 200,000 draws: the simulation's own error is 0.0005


def test_pocock_type_boundaries_are_the_published_ones():
    # Lan-DeMets Pocock-type spending, 5 equally spaced looks, two-sided 0.05 (Jennison & Turnbull 2000, table 7.6;
    # gsDesign sfLDPocock): 2.438, 2.427, 2.410, 2.397, 2.389
    c = seq.boundaries(seq.Design(1, 1, 5, "pocock"), 0.05)
    assert c == pytest.approx((2.438, 2.427, 2.410, 2.397, 2.389), abs=0.005)


def test_the_first_obrien_fleming_boundary_is_closed_form():
    design = seq.Design(4, 4, 16, "obrien-fleming")  # t_1 = 1/4
    assert seq.boundaries(design, 0.05)[0] == pytest.approx(1.959964 / math.sqrt(0.25), rel=1e-6)


def test_looks_are_counted_in_jobs_per_arm_up_to_the_horizon():
    design = seq.Design(3, 2, 10)
    assert design.looks == (3, 5, 7, 9, 10)
    assert [design.look_of(n) for n in (1, 3, 4, 5, 10, 12)] == [1, 1, 2, 2, 5, 5]
    with pytest.raises(ValueError, match="horizon"):
        seq.Design(5, 1, 4)


@pytest.mark.parametrize("look,df", [(1, 2.0), (4, 5.0), (10, 12.0), (3, math.inf)])
def test_the_repeated_p_value_is_the_alpha_at_which_the_boundary_is_met(look, df):
    design = seq.Design(3, 1, 16)
    for alpha in (0.001, 0.01, 0.05, 0.2):
        c = seq.critical_t(design, look, df, alpha)
        assert seq.repeated_p(design, look, c, df) == pytest.approx(alpha, rel=0.01)
    assert seq.repeated_p(design, look, -1.0, df) == 1.0


def test_a_t_boundary_is_wider_than_the_normal_one_and_narrows_with_df():
    design = seq.Design(3, 1, 16)
    normal = seq.critical_t(design, 1, math.inf, 0.05)
    assert seq.critical_t(design, 1, 2.0, 0.05) > seq.critical_t(design, 1, 10.0, 0.05) > normal


def test_a_look_widens_the_interval_of_the_same_jobs_and_a_large_effect_is_still_decided():
    eager, graph = [550.0, 560.0, 545.0, 552.0], [415.0, 418.0, 420.0, 414.0]
    fixed = iv.judge(eager, graph)
    looked = iv.judge(eager, graph, look=iv.Look(seq.Design(3, 1, 16), 2))
    assert looked.lo < fixed.lo and looked.hi > fixed.hi
    assert fixed.ratio == looked.ratio
    assert looked.verdict == SPEEDUP and looked.p_beyond < 0.05


def test_a_small_effect_the_fixed_design_would_call_is_inconclusive_at_a_look():
    eager, graph = [100.0, 101.0, 99.5], [94.0, 95.5, 93.0]
    assert iv.judge(eager, graph).verdict == SPEEDUP
    looked = iv.judge(eager, graph, look=iv.Look(seq.Design(3, 1, 16), 1))
    assert looked.verdict == INCONCLUSIVE and looked.p_beyond > 0.05


def test_repeats_for_power_plans_on_the_designs_looks():
    design = seq.Design(3, 2, 16)
    e = iv.summarize_arm([550.0, 600.0, 500.0], 0.1)
    g = iv.summarize_arm([450.0, 470.0, 430.0], 0.1)
    n = iv.repeats_for_power(e, g, design=design)
    assert n is not None and n in design.looks and n > 3
