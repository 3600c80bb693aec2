"""The family gate (graphsweep.judge.compare.family_gate) on real H200 jobs: one sweep's cells share their shape's
eager baseline, so a decided speedup/slowdown needs its Benjamini-Hochberg q below alpha as well as its own
interval (docs/statistics.md "Many variants, one baseline"; benchmarks/validate_family.py measures it)."""

from __future__ import annotations

import math
from argparse import Namespace
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

from tests.support import benchmark

pytestmark = pytest.mark.slow  # the real H200 jobs' logs are parsed first (benchmarks/realjobs.py)
realjobs = benchmark("realjobs")
validate_family = benchmark("validate_family")

from graphsweep.judge import interval as iv  # noqa: E402
from graphsweep.judge.compare import GATED_VERDICTS, family_gate  # noqa: E402
from graphsweep.judge.verdict import ArmRun, judge_cell  # noqa: E402
from graphsweep.vocab import AA, BLOCKED, INCONCLUSIVE, SPEEDUP  # noqa: E402

# h200-extra/medium (probe.py, 2026-12-01): three eager jobs (10.8, 13.75, 10.4 ms; its 16 jobs span 10.35-17.75)
# as the shared baseline, full_iteration jobs (6.2 ms in every job: a real 1.9x speedup) and more eager jobs as
# variants without an effect.
BASELINE = ["medium-eager-1", "medium-eager-10", "medium-eager-12"]
NULL_A = ["medium-eager-11", "medium-eager-13", "medium-eager-14"]
NULL_B = ["medium-eager-15", "medium-eager-16", "medium-eager-2"]
FULL = [["medium-full_iteration-1", "medium-full_iteration-10", "medium-full_iteration-11"],
        ["medium-full_iteration-12", "medium-full_iteration-13", "medium-full_iteration-14"],
        ["medium-full_iteration-15", "medium-full_iteration-16", "medium-full_iteration-2"]]


def runs(config: str, ids: list[str]) -> list[ArmRun]:
    js = realjobs.jobs(config, ids)
    assert len(js) == len(ids), f"{config}: not all of {ids} are usable real jobs"
    return [ArmRun(j.run_id, j.outcome, j.step_ms, j.print_step_ms, seed=j.seed, loss=j.losses) for j in js]


def cell(name: str, eager: list[str], graph: list[str], graph_config: str = "h200-extra/medium/eager",
         eager_config: str = "h200-extra/medium/eager", control: bool = False) -> dict:
    """One comparison row as judge/compare.py writes it: the judge's record, the cell's names, not yet gated."""
    v = judge_cell(runs(eager_config, eager), runs(graph_config, graph), margin=iv.MARGIN, alpha=iv.ALPHA,
                   control=control)
    return {**asdict(v), "cell_id": name, "shape_id": "medium", "variant": AA if control else name,
            "family_gated": False}


def blocked(name: str) -> dict:
    """A cell the preflight blocked, as compare writes it (no runs, no timing, no p)."""
    return {"cell_id": name, "shape_id": "medium", "variant": name, "verdict": BLOCKED, "margin": iv.MARGIN,
            "failure_detail": "CUDA graphs need --no-check-for-nan-in-loss-and-grad", "rule_id": "example",
            "gpu_seconds": 0.0, "family_gated": False}


def gated(rows: list[dict]) -> pd.DataFrame:
    return family_gate(pd.DataFrame(rows)).set_index("cell_id")


@pytest.fixture(scope="module")
def real_speedup() -> dict:
    row = cell("full", BASELINE, FULL[0], graph_config="h200-extra/medium/full_iteration")
    # its own interval excludes the band at alpha, but not at alpha / 3
    assert row["verdict"] in GATED_VERDICTS and row["ci_low"] > 1 + iv.MARGIN
    assert iv.ALPHA / 3 < row["p_beyond"] < iv.ALPHA
    return row


def test_a_speedup_among_null_neighbours_whose_q_reaches_alpha_reads_inconclusive(real_speedup):
    rows = [real_speedup, cell("null-a", BASELINE, NULL_A), cell("null-b", BASELINE, NULL_B)]
    assert [r["verdict"] for r in rows[1:]] == [INCONCLUSIVE, INCONCLUSIVE]
    df = gated(rows)
    full = df.loc["full"]
    assert full.verdict == INCONCLUSIVE and full.family_gated
    assert full.q_value == pytest.approx(iv.benjamini_hochberg([r["p_beyond"] for r in rows])[0])
    assert full.q_value >= iv.ALPHA
    assert f"q = {full.q_value:.3f}" in full.reason and "not below alpha 0.05" in full.reason
    assert "Benjamini-Hochberg" in full.reason
    # the neighbours were not decided: nothing to gate, their verdicts stand
    assert list(df.loc[["null-a", "null-b"], "verdict"]) == [INCONCLUSIVE, INCONCLUSIVE]
    assert not df.loc[["null-a", "null-b"], "family_gated"].any()


def test_speedups_whose_neighbours_are_speedups_too_pass_the_gate(real_speedup):
    rows = [real_speedup] + [cell(f"full{i}", BASELINE, FULL[i], graph_config="h200-extra/medium/full_iteration")
                             for i in (1, 2)]
    df = gated(rows)
    assert all(v in GATED_VERDICTS for v in df.verdict) and not df.family_gated.any()
    assert (df.q_value < iv.ALPHA).all()


def test_an_aa_control_cell_is_never_gated_and_not_in_the_family(real_speedup):
    # h200-jobs/medium eager (bimodal: 13.1-13.55 or 14.9-16.75 ms): a baseline from the slow mode against a control
    # arm from the fast one reads a false speedup, the measured false positive the report's A/A line counts
    aa = cell("aa", ["medium-eager-1", "medium-eager-10", "medium-eager-11"],
              ["medium-eager-12", "medium-eager-3", "medium-eager-5"], graph_config="h200-jobs/medium/eager",
              eager_config="h200-jobs/medium/eager", control=True)
    assert aa["verdict"] == SPEEDUP
    df = gated([aa, real_speedup])
    assert df.loc["aa", "verdict"] == SPEEDUP and not df.loc["aa", "family_gated"]
    assert df.loc["aa", "q_value"] is None or math.isnan(df.loc["aa", "q_value"])
    # a family of one: the real cell's q is its own p, and its verdict stands
    assert df.loc["full", "q_value"] == pytest.approx(real_speedup["p_beyond"])
    assert df.loc["full", "verdict"] == real_speedup["verdict"] and not df.loc["full", "family_gated"]


def test_blocked_cells_are_not_in_the_family(real_speedup):
    df = gated([real_speedup, blocked("b1"), blocked("b2")])
    assert df.loc["full", "q_value"] == pytest.approx(real_speedup["p_beyond"])
    assert df.loc["full", "verdict"] == real_speedup["verdict"]
    assert list(df.loc[["b1", "b2"], "verdict"]) == [BLOCKED, BLOCKED]
    assert df.loc["b1", "reason"].startswith("preflight: ")
    # the same cell next to two timed neighbours instead is gated: the blocked ones were left out, not ignored
    timed = gated([real_speedup, cell("null-a", BASELINE, NULL_A), cell("null-b", BASELINE, NULL_B)])
    assert timed.loc["full", "family_gated"]


def test_the_gate_only_demotes(real_speedup):
    """benchmarks/validate_family.py skips the gate for a sweep with no decided cell: that is exact only because
    the gate never turns a verdict into a decided one."""
    rows = [cell("null-a", BASELINE, NULL_A), cell("null-b", BASELINE, NULL_B),
            cell("same", NULL_A, NULL_B)]
    before = [r["verdict"] for r in rows]
    assert not set(before) & set(GATED_VERDICTS)
    assert list(gated(rows).verdict) == before
    mixed = [real_speedup, *rows]
    after = gated(mixed).verdict
    for r, v in zip(mixed, after):
        assert v == r["verdict"] or (r["verdict"] in GATED_VERDICTS and v == INCONCLUSIVE)


def test_family_wise_rate_of_three_null_variants_on_a_three_job_baseline_is_at_most_alpha():
    """The audit's design (3 variants on a 3-job baseline) on the pool's worst configuration for it: h200-jobs
    medium eager, whose jobs fall in two modes 20 % apart. Every arm is eager jobs of that one configuration, so
    every speedup or slowdown is false. The per-cell rule alone prints one in more than alpha of the sweeps; the
    gate keeps it at alpha within the resampling error."""
    draws, alpha = 400, iv.ALPHA
    a = Namespace(margin=iv.MARGIN, alpha=alpha, with_loss=False)
    jobs = realjobs.jobs("h200-jobs/medium/eager")
    assert len(jobs) == 12
    t = validate_family.null_config(jobs, 3, draws, np.random.default_rng([0, 3]), a)[3]
    assert t.sweeps == draws
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / draws)  # two binomial standard errors at a rate of alpha
    assert t.rate(t.any_gate) <= bound, (t.rate(t.any_cell), t.rate(t.any_gate))
    assert t.rate(t.any_cell) > bound  # without the gate the audit's finding stands
    assert t.false_gate < t.false_cell
