"""Real H200 logs of the builtin workload, re-parsed and re-judged on the CPU (tests/fixtures/h200/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphsweep.parse.run import parse_run

H200 = Path(__file__).parent / "fixtures" / "h200"


def compare(eager: str, graph: str) -> dict:
    cmd = [sys.executable, "-m", "graphsweep.cli", "compare", "--json", "--eager", str(H200 / eager), "--graph", str(H200 / graph)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


@pytest.mark.parametrize("graph_log, low, high", [("full.log", 2.0, 2.8), ("attnmlp.log", 1.3, 1.7)])
def test_launch_bound_shape_gives_a_real_speedup(graph_log, low, high):
    v = compare("eager.log", graph_log)
    assert v["verdict"] == "speedup"
    assert low < v["speedup"] < high
    assert v["ci_low"] > 1.02  # the interval excludes the practical margin
    assert "within-run" in v["ci_method"]  # one job per arm: said, not hidden


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
