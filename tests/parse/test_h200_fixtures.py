"""Real H200 logs of the builtin workload, re-parsed and re-judged on the CPU (tests/fixtures/h200/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graphsweep.parse.run import parse_run
from tests.support import SHARED_FIXTURES

H200 = SHARED_FIXTURES / "h200"


def compare(eager: str, graph: str) -> dict:
    cmd = [sys.executable, "-m", "graphsweep.cli", "compare", "--json", "--eager", str(H200 / eager), "--graph", str(H200 / graph)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("graph_log, low, high, plannable", [("full.log", 2.0, 2.8, True),
                                                             ("attnmlp.log", 1.3, 1.7, False)])
def test_one_job_per_arm_estimates_but_does_not_claim_the_speedup(graph_log, low, high, plannable):
    """One job per arm cannot show the job-to-job spread (launch-bound eager jobs of this shape ran at 13.1-16.8 ms:
    benchmarks/data/h200-jobs): the estimate is there, the verdict waits for repeats, and the reason says why. At the
    allowance's spread a 2.4x effect is decided within the decision loop's 16 looks, a 1.5x one is not (the fixed
    design's one look would ask for 13 jobs per arm: --one-look)."""
    v = compare("eager.log", graph_log)
    assert low < v["speedup"] < high
    assert v["verdict"] == "inconclusive" and v["thin"] and v["eager_spread"] == v["graph_spread"] == "allowance"
    assert v["ci_low"] < 1.02 < v["speedup"] < v["ci_high"]
    assert "fewer than 3 jobs in an arm" in v["reason"]
    if plannable:
        assert 2 <= v["repeats_needed"] <= 16 and f"about {v['repeats_needed']} repeats per arm" in v["reason"]
    else:
        assert v["repeats_needed"] is None and "more repeats per arm than graphsweep plans" in v["reason"]


def test_graph_runs_show_capture_and_more_memory_than_eager():
    eager = parse_run([H200 / "eager.log"], arm="eager", warmup=3).summary
    full = parse_run([H200 / "full.log"], arm="graph", warmup=3).summary
    scoped = parse_run([H200 / "attnmlp.log"], arm="graph", warmup=3).summary
    assert not eager.capture_seen and full.capture_seen and full.replay_seen and scoped.capture_seen
    assert full.peak_mem_gb > eager.peak_mem_gb and scoped.peak_mem_gb > full.peak_mem_gb
    assert full.steady_first == 5  # warmup 3, capture on iteration 4, steady from 5


def test_capped_graph_run_is_a_cuda_oom_with_the_requested_size():
    s = parse_run([H200 / "oom.log"], arm="graph", warmup=3).summary
    assert s.outcome == "oom"
    assert s.oom_request and "MiB" in s.oom_request
