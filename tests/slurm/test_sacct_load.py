"""Scheduler load: 200 runs waiting at once ask sacct at most 12 times a minute in total.

Each waiter is a separate process running the run rule's SlurmWaiter on a real (held, so PENDING) Slurm job; a
counting `sacct` wrapper is first on their PATH. The shared cache refreshes all 200 jobs with one batched call,
at most once per interval, whoever asks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.slurm.slurm_workflow import ROOT, calls, counting_wrappers, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

N_RUNS = 200
INTERVAL_S = 6.0  # below the default (10 s) to press against the limit; 6 s allows 10 calls a minute
WINDOW_S = 65.0


def max_calls_per_minute(times: list[float]) -> int:
    """The most calls in any 60-second window [t, t + 60)."""
    times = sorted(times)
    return max((sum(1 for u in times[i:] if u < t + 60) for i, t in enumerate(times)), default=0)


def test_max_calls_per_minute_counts_a_sliding_window():
    assert max_calls_per_minute([0, 10, 59.9, 60, 70]) == 3
    assert max_calls_per_minute([]) == 0


def test_200_waiting_runs_share_at_most_12_sacct_calls_a_minute(slurm_cluster, tmp_path):
    logs = counting_wrappers(tmp_path / "bin", ("sacct",))
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    ids = []
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(N_RUNS):  # held: PENDING for as long as the test needs, using no CPU
            res = subprocess.run(["sbatch", "--hold", "--parsable", "-J", "gs-load", "-o", "/dev/null", "--wrap",
                                  "sleep 1"], capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
            ids.append(res.stdout.strip().split(";")[0])
        waiter = Path(__file__).with_name("load_waiter.py")
        for job_id in ids:
            procs.append(subprocess.Popen(
                [sys.executable, str(waiter), job_id, str(tmp_path / "jobs" / "%j"), str(tmp_path / "state"),
                 str(INTERVAL_S)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                stdin=subprocess.DEVNULL))  # fmt: skip
        cache_file = tmp_path / "state" / "sacct.json"

        def all_pending():
            try:
                jobs = json.loads(cache_file.read_text())["jobs"]
            except (OSError, ValueError, KeyError):
                return False
            return len(jobs) == N_RUNS and {j["state"] for j in jobs.values()} == {"PENDING"}

        wait_until(all_pending, 180, f"the shared cache to know all {N_RUNS} jobs as PENDING")
        start = time.time()
        time.sleep(WINDOW_S)  # a measurement window with all waiters polling
        assert all(p.poll() is None for p in procs), "a waiter gave up on a PENDING job"
        times = [c.t for c in calls(logs["sacct"])]
        in_window = [t for t in times if t >= start]
        assert in_window, "no sacct call while 200 runs waited: nobody would notice a failed job"
        per_minute = max_calls_per_minute(times)
        print(f"{len(times)} sacct calls in total, at most {per_minute} in any minute, for {N_RUNS} waiting runs")
        assert per_minute <= 12
        # Every call was one batched query for all jobs, not one per job.
        assert all(c.args.count(",") >= N_RUNS - 1 for c in calls(logs["sacct"])[-3:])
    finally:
        if ids:
            subprocess.run(["scancel", *ids], timeout=120)
    # Cancelled jobs end every waiter as an infrastructure failure (the rule would fail and be retried).
    outputs = []
    for p in procs:
        out, _ = p.communicate(timeout=180)
        outputs.append(out.strip())
    assert all(o.endswith("infra CANCELLED") for o in outputs), sorted(set(outputs))[:5]
