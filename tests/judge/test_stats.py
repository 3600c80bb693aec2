"""graphsweep.judge.verdict and graphsweep.parse.window: cell verdicts and steady windows behave as a performance engineer
expects. The timing cases here are constructed runs (named as such: `runs()` draws a steady window around a given
median); the same rules on real H200 jobs are tests/judge/test_statistics_real.py."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from dataclasses import asdict

from graphsweep.judge import prose
from graphsweep.judge.interval import ALLOWANCE, OBSERVED, benjamini_hochberg
from graphsweep.judge.verdict import ArmRun, Verdict, aa_false_positive_rate
from graphsweep.judge.verdict import judge_cell as _judge_cell
from graphsweep.parse.window import steady_window
from tests.support import LOGS

# Megatron Bridge training_log (train_utils.py, 0.2-0.6; docs/megatron-facts.md §5.1)
ITER_RE = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): ([0-9.]+)")


def judge_cell(eager: list[ArmRun], graph: list[ArmRun], **kw) -> Verdict:
    kw.setdefault("margin", 0.02)
    return _judge_cell(eager, graph, **kw)


def reason(v: Verdict) -> str:
    return prose.reason(asdict(v))


# One training trajectory that both arms follow (same seed, same loss): these cases test timing, and a speedup is
# only decided where the graph arm is shown to train the eager model (tests/judge/test_parity.py tests that part).
SAME_LOSS = {i: 10.0 - 0.05 * i for i in range(1, 31)}


def runs(arm: str, medians: list[float], *, n_iter: int = 30, jitter: float = 0.005, seed: int = 0, **kw) -> list[ArmRun]:
    """Completed runs with the given steady medians and small deterministic within-run noise."""
    kw.setdefault("seed", 1234)
    kw.setdefault("loss", SAME_LOSS)
    rng = np.random.default_rng(seed)
    out = []
    for i, m in enumerate(medians):
        x = m * (1 + jitter * rng.standard_normal(n_iter))
        x += m - np.median(x)  # exact median, so the test controls the between-run spread
        out.append(ArmRun(f"{arm}-r{i + 1}", "completed", x.tolist(), **kw))
    return out


def failed(arm: str, outcome: str, reason: str = "", n: int = 1, **kw) -> list[ArmRun]:
    return [ArmRun(f"{arm}-{outcome}-{i + 1}", outcome, [], reason=reason, **kw) for i in range(n)]


def read_log(name: str) -> tuple[list[int], list[float]]:
    its, ms = [], []
    for line in (LOGS / name).read_text(errors="replace").splitlines():
        m = ITER_RE.search(line)
        if m:
            its.append(int(m[1]))
            ms.append(float(m[2]))
    return its, ms


# ---------------------------------------------------------------- timing verdicts


def test_clear_20_percent_speedup_with_three_repeats_is_a_speedup():
    v = judge_cell(runs("eager", [100.0, 102.0, 99.0]), runs("graph", [83.0, 84.5, 82.5], seed=1))
    assert v.verdict == "speedup"
    assert v.speedup == pytest.approx(1.2, abs=0.02)
    assert 1.02 < v.ci_low < v.speedup < v.ci_high
    assert (v.design, v.eager_spread, v.graph_spread, v.df) == ("unpaired", OBSERVED, OBSERVED, 2.0)  # Hsu: min n-1
    assert (v.n_eager, v.n_graph) == (3, 3)
    assert v.eager_step_ms / v.graph_step_ms == pytest.approx(v.speedup)  # the printed step times give the ratio
    assert v.eager_step_ms == pytest.approx((100.0 * 102.0 * 99.0) ** (1 / 3))  # geometric mean of the job medians
    assert v.p_beyond < v.alpha == 0.05 and v.p_within == pytest.approx(1.0)
    assert v.paired_outcome == "both-completed"


def test_identical_arms_are_neutral():
    v = judge_cell(runs("eager", [50.0, 50.2, 49.9]), runs("graph", [50.1, 49.9, 50.0], seed=1))
    assert v.verdict == "neutral"
    assert 0.98 <= v.ci_low <= 1 <= v.ci_high <= 1.02
    assert "inside 1 ± 0.02" in reason(v)
    assert v.p_within < v.alpha


def test_slowdown_when_graph_clearly_slower():
    v = judge_cell(runs("eager", [40.0, 40.3, 39.8]), runs("graph", [44.0, 44.4, 43.9], seed=1))
    assert v.verdict == "slowdown" and v.ci_high < 0.98


def test_noise_larger_than_the_effect_is_inconclusive_and_says_more_repeats_decide():
    # launch-bound eager jobs of one shape at 15 and 18 ms (h200-probe): a 5 % effect cannot be told apart
    v = judge_cell(runs("eager", [15.0, 18.0, 16.5]), runs("graph", [14.3, 17.1, 15.7], seed=1))
    assert v.verdict == "inconclusive"
    assert v.ci_low < 1.02 and v.ci_high > 1.02
    assert v.repeats_needed is None and "more repeats per arm than graphsweep plans would be needed (up to 64" in reason(v)
    bigger = judge_cell(runs("eager", [15.0, 18.0, 16.5]), runs("graph", [12.5, 15.0, 13.75], seed=1))  # 1.2x
    assert bigger.verdict == "inconclusive" and 3 < bigger.repeats_needed <= 64
    assert f"about {bigger.repeats_needed} repeats per arm would decide it" in reason(bigger)


def test_effect_inside_margin_but_uncertain_is_inconclusive_not_neutral():
    v = judge_cell(runs("eager", [50.0, 51.5, 49.0]), runs("graph", [49.5, 50.0, 50.5], seed=1))
    assert v.verdict == "inconclusive"


def test_one_repeat_per_arm_assumes_the_allowance_and_says_so():
    """One job per arm shows no job-to-job spread: the allowance stands in; a 2x effect is not decided, 10x is."""
    v = judge_cell(runs("eager", [20.0], jitter=0.02), runs("graph", [10.0], jitter=0.02, seed=1))
    assert v.verdict == "inconclusive" and v.thin and (v.eager_spread, v.graph_spread) == (ALLOWANCE, ALLOWANCE)
    assert v.ci_low < 1 < 2 < v.ci_high
    assert "its job-to-job spread is the allowance" in reason(v)
    assert (v.n_eager, v.n_graph) == (1, 1)
    big = judge_cell(runs("eager", [100.0], jitter=0.02), runs("graph", [10.0], jitter=0.02, seed=1))
    assert big.verdict == "speedup" and big.ci_low > 4


def test_pairing_by_repeat_index_removes_a_shared_node_effect():
    # Each repeat ran both arms on the same node: node levels 1.0, 1.15, 0.9 hit both arms alike.
    nodes = [1.0, 1.15, 0.9]
    eager = runs("eager", [40.0 * k for k in nodes])
    graph = runs("graph", [40.0 / 1.1 * k for k in nodes], seed=1)
    assert judge_cell(eager, graph).verdict == "inconclusive"
    v = judge_cell(eager, graph, paired=True)
    assert v.verdict == "speedup" and v.speedup == pytest.approx(1.1, rel=1e-6)
    assert v.design == "paired" and prose.method(asdict(v)).startswith("paired t on log ratios (3 pairs")


def test_margin_is_configurable():
    eager, graph = runs("eager", [100.0, 100.2, 99.9]), runs("graph", [97.0, 97.1, 96.9], seed=1)
    assert judge_cell(eager, graph).verdict == "speedup"
    assert judge_cell(eager, graph, margin=0.05).verdict == "neutral"


def test_speedup_that_costs_memory_says_how_much():
    v = judge_cell(
        runs("eager", [100.0, 101.0, 99.5], mem_gb=40.0),
        runs("graph", [80.0, 80.5, 79.5], seed=1, mem_gb=52.5),
    )
    assert v.verdict == "speedup"
    assert (v.eager_mem_gb, v.graph_mem_gb, v.mem_delta_gb) == (40.0, 52.5, 12.5)
    assert "costs +12.50 GB memory (+31%" in reason(v)


# ---------------------------------------------------------------- outcome precedence


def test_both_arms_oom_is_baseline_failed_both_oom():
    v = judge_cell(failed("eager", "oom", "CUDA out of memory", 3), failed("graph", "oom", "CUDA out of memory", 3))
    assert (v.verdict, v.paired_outcome) == ("baseline-failed", "both-oom")
    assert v.speedup is None and v.design == ""


def test_eager_failure_is_baseline_failed_even_when_graph_works():
    v = judge_cell(failed("eager", "crashed", "NCCL watchdog timeout", 3), runs("graph", [10.0, 10.1, 10.0]))
    assert (v.verdict, v.paired_outcome) == ("baseline-failed", "graph-fixes-failure")
    assert "NCCL watchdog timeout" in reason(v)


def test_graph_blocked_carries_the_graph_runs_reason():
    why = "AssertionError: full recompute is only supported with full iteration CUDA graph."
    v = judge_cell(runs("eager", [30.0, 30.2, 29.9]), failed("graph", "blocked", why, 3))
    assert v.verdict == "blocked" and why in reason(v)


def test_graph_only_oom_while_eager_fit():
    v = judge_cell(
        runs("eager", [30.0, 30.2, 29.9], mem_gb=70.0),
        failed("graph", "oom", "torch.OutOfMemoryError: CUDA out of memory during capture", 3),
    )
    assert (v.verdict, v.paired_outcome) == ("oom", "graph-only-oom")
    assert "graph-only OOM" in reason(v) and "70.00 GB" in reason(v)
    assert v.eager_mem_gb == 70.0 and v.graph_mem_gb is None


def test_graph_oom_in_some_repeats_is_oom_and_explains():
    graph = runs("graph", [20.0, 20.1]) + failed("graph", "oom", "CUDA out of memory")
    v = judge_cell(runs("eager", [30.0, 30.2, 29.9]), graph)
    assert (v.verdict, v.paired_outcome) == ("oom", "graph-sometimes-oom")
    assert "1 of 3 repeats" in reason(v) and "2 completed graph run(s)" in reason(v)


def test_graph_without_replay_evidence_is_invalid():
    v = judge_cell(
        runs("eager", [30.0, 30.2, 29.9]),
        failed("graph", "invalid", "no capture or replay marker in the log", 3),
    )
    assert v.verdict == "invalid" and "without evidence" in reason(v)


def test_graph_crash_is_failed_graph_crashed():
    v = judge_cell(
        runs("eager", [30.0, 30.2, 29.9]),
        failed("graph", "crashed", "CUDA error: an illegal memory access was encountered", 3, error_class="illegal-memory-access"),
    )
    assert (v.verdict, v.paired_outcome) == ("failed", "graph-crashed")
    assert v.crashed_run_ids == ["graph-crashed-1", "graph-crashed-2", "graph-crashed-3"]
    assert "illegal memory access" in reason(v) and "3 of 3 graph runs crashed" in reason(v)
    # a timeout before the window is no crash: the arm has no usable run, the graph did not crash (issue 40)
    v = judge_cell(runs("eager", [30.0, 30.2, 29.9]), failed("graph", "timeout", "walltime before iteration 5", 3))
    assert (v.verdict, v.paired_outcome) == ("failed", "graph-introduces-failure")


def test_timeout_counts_only_with_steady_data():
    eager = runs("eager", [30.0, 30.2, 29.9])
    late = [ArmRun(r.run_id, "timeout", r.step_ms, seed=r.seed, loss=r.loss) for r in runs("graph", [20.0, 20.1, 19.9], seed=1)]
    assert judge_cell(eager, late).verdict == "speedup"  # timed out in teardown, after the window
    assert judge_cell(eager, failed("graph", "timeout", "walltime before iteration 5", 3)).verdict == "failed"


def test_one_repeat_lost_to_infrastructure_is_excluded_and_said_aloud():
    """A node or network fault (the retry policy's transient, docs/failures.md) is infrastructure's: excluded."""
    for kw in ({"transient": True}, {"error_class": "transient:network"}):
        graph = runs("graph", [20.0, 20.1, 19.9], seed=1) + failed("graph", "crashed", "NCCL error", **kw)
        v = judge_cell(runs("eager", [30.0, 30.2, 29.9, 30.1]), graph)
        assert v.verdict == "speedup" and v.n_graph == 3, kw
        assert v.paired_outcome == "mixed" and v.excluded_run_ids == ["graph-crashed-1"] and not v.crashed_run_ids
        assert "excluded 1 run(s) from the timing (graph-crashed-1: graph 1 crashed" in reason(v)


def test_one_repeat_crashed_of_its_own_cause_fails_the_cell_with_its_timing_recorded():
    """Issue 40: a graph run that died of `CUDA error: an illegal memory access` makes the setting `failed`, however
    fast the other two were; the timing stays in the row for the reader, and the reason names the run and its cause.
    The same crash in the eager arm too is the model's or the machine's, not the graph's: excluded."""
    crash = failed("graph", "crashed", "CUDA error: an illegal memory access was encountered",
                   error_class="illegal_memory_access")
    v = judge_cell(runs("eager", [30.0, 30.2, 29.9, 30.1]), runs("graph", [20.0, 20.1, 19.9], seed=1) + crash)
    assert (v.verdict, v.paired_outcome, v.failure_run_id) == ("failed", "graph-crashed", "graph-crashed-1")
    assert v.crashed_run_ids == ["graph-crashed-1"] and v.failure_class == "illegal_memory_access"
    assert v.speedup is not None and v.speedup > 1.4 and v.n_graph == 3
    assert "1 of 4 graph runs crashed" in reason(v) and "illegal memory access" in reason(v) and "not a result" in reason(v)
    eager = runs("eager", [30.0, 30.2, 29.9, 30.1]) + failed("eager", "crashed", "IMA", error_class="illegal_memory_access")
    v = judge_cell(eager, runs("graph", [20.0, 20.1, 19.9], seed=1) + crash)
    assert v.verdict == "speedup" and not v.crashed_run_ids


def test_precedence_blocked_before_oom_before_failed():
    eager = runs("eager", [30.0, 30.2, 29.9])
    mix = failed("graph", "crashed", "x") + failed("graph", "oom", "y") + failed("graph", "blocked", "z")
    assert judge_cell(eager, mix).verdict == "blocked"
    assert judge_cell(eager, mix[:2]).verdict == "oom"


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="alpha=0 must be in"):
        judge_cell(runs("eager", [1.0]), runs("graph", [1.0]), alpha=0)
    with pytest.raises(ValueError, match="margin=2 must be a fraction"):
        judge_cell(runs("eager", [1.0]), runs("graph", [1.0]), margin=2)
    with pytest.raises(ValueError, match="outcome 'success' is not one of"):
        ArmRun("r1", "success", [1.0])
    with pytest.raises(ValueError, match="r2.*NaN, inf or non-positive"):
        ArmRun("r2", "completed", [10.0, float("nan")])


# ---------------------------------------------------------------- across cells


def test_benjamini_hochberg_matches_hand_computed_values():
    with pytest.raises(ValueError, match="outside"):
        benjamini_hochberg([1.5])
    # sorted: 0.005 (k=1) 0.01 (2) 0.03 (3) 0.04 (4); m p/k = 0.02 0.02 0.04 0.04; step-up minimum keeps them
    q = benjamini_hochberg([0.01, 0.04, 0.03, 0.005, None])
    assert q[4] is None
    assert q[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02])
    # step-up: 0.02 * 2 / 1 = 0.04 is lowered to the next rank's 0.021 * 2 / 2
    assert benjamini_hochberg([0.02, 0.021]) == pytest.approx([0.021, 0.021])
    assert benjamini_hochberg([]) == []


def test_aa_false_positive_rate_counts_only_judged_control_cells():
    assert aa_false_positive_rate(["neutral", "speedup", "inconclusive", "blocked", "slowdown"]) == (2, 4, 0.5)
    fp, n, rate = aa_false_positive_rate(["failed"])
    assert (fp, n) == (0, 0) and math.isnan(rate)


# ---------------------------------------------------------------- steady window


def test_steady_window_skips_before_first_allowed_and_trims_a_leading_drift():
    its = list(range(1, 41))
    ms = [900.0, 60.0, 55.0, 120.0] + [30.0, 24.0, 19.0] + [10.0 + 0.1 * (i % 3) for i in range(33)]
    w = steady_window(its, ms, first_allowed=5)
    assert (w.first, w.last, w.n, w.trimmed) == (8, 40, 33, 3)
    assert "trimmed leading transient 5-7" in w.reason
    assert "4 skipped before iteration 5" in w.reason
    assert w.median_ms == pytest.approx(10.1)


def test_steady_window_too_few_iterations_is_its_own_reason():
    w = steady_window(list(range(1, 31)), [10.0] * 30, first_allowed=28)
    assert (w.first, w.last, w.n) == (None, None, 3)
    assert w.reason == "too few steady iterations (3 < 5) at or after iteration 28; the log ends at iteration 30"


def test_steady_window_keeps_real_job_noise_that_is_not_warmup():
    # h200-probe eager job 1: 15.3 ms, then 13.0 ms from iteration 16, then back to 15.7 ms at 26
    its, ms = read_log("h200-probe/medium-eager-1.log")
    w = steady_window(its, ms, first_allowed=5)
    assert (w.first, w.last, w.trimmed) == (5, 30, 0)
    assert "level shift at iteration 16 kept" in w.reason


def test_steady_window_on_real_graph_run_excludes_capture_only():
    its, ms = read_log("h200-probe/medium-graph-1.log")  # capture on iteration 4 (40.8 ms)
    w = steady_window(its, ms, first_allowed=5)
    assert (w.first, w.last, w.n, w.trimmed) == (5, 30, 26, 0)
    assert w.median_ms == pytest.approx(6.2)


def test_steady_window_rejects_inputs_it_cannot_trust():
    with pytest.raises(ValueError, match="strictly increasing"):
        steady_window([1, 2, 2, 3], [1.0] * 4, 1)
    with pytest.raises(ValueError, match="one elapsed time per parsed iteration line"):
        steady_window([1, 2], [1.0], 1)
