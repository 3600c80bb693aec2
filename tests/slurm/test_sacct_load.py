"""Scheduler load: 200 runs in flight ask sacct once per status interval in total, one batched call for all of them.

The controller's own loop (run/watch.py Fleet, what the graphsweep executor polls) watches 200 real Slurm jobs, held so
that they stay PENDING, using no CPU; a counting `sacct` wrapper is first on PATH. Then every job is cancelled and
the same loop reads each as an infrastructure failure (the run rule would fail and be retried).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from graphsweep.records import JobSide
from graphsweep.run.slurm import SacctWatcher, WaitLimits
from graphsweep.run.watch import INFRA, Fleet

from tests.slurm.slurm_workflow import calls, counting_wrappers

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

N_RUNS = 200
INTERVAL_S = 6.0  # below the default (10 s) to press against the limit
WINDOW_S = 30.0


def test_200_runs_in_flight_make_one_batched_sacct_call_per_interval(slurm_cluster, tmp_path, monkeypatch):
    logs = counting_wrappers(tmp_path / "bin", ("sacct",))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    ids: list[str] = []
    try:
        for _ in range(N_RUNS):  # held: PENDING for as long as the test needs, using no CPU
            res = subprocess.run(["sbatch", "--hold", "--parsable", "-J", "gs-load", "-o", "/dev/null", "--wrap",
                                  "sleep 1"], capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
            ids.append(res.stdout.strip().split(";")[0])
        limits = WaitLimits(poll_s=0.5, status_interval_s=INTERVAL_S, progress_interval_s=3600, result_grace_s=3)
        fleet = Fleet(SacctWatcher(INTERVAL_S), limits, say=lambda _: None)
        flights = [fleet.add(f"load-{j}", JobSide("slurm", j, str(tmp_path / "%j"), "")) for j in ids]
        start = time.monotonic()
        while time.monotonic() - start < WINDOW_S:  # what the executor does every poll_s
            assert fleet.poll(flights) == [], "a PENDING job was given up"
            time.sleep(limits.poll_s)
        made = calls(logs["sacct"])
        print(f"{len(made)} sacct calls in {WINDOW_S:.0f} s for {N_RUNS} runs in flight")
        assert 1 <= len(made) <= WINDOW_S / INTERVAL_S + 1
        asked = [c.args.split("-j ", 1)[1].split()[0].split(",") for c in made]
        assert all(sorted(a) == sorted(ids) for a in asked)  # one query for all jobs, never one per job
        assert {fleet.last[j].record.state for j in ids} == {"PENDING"}
    finally:
        if ids:
            subprocess.run(["scancel", *ids], timeout=120)
    # Cancelled jobs end every run as an infrastructure failure, once sacct has said so for longer than the grace.
    failed: dict[str, str] = {}
    end = time.monotonic() + 120
    while len(failed) < N_RUNS and time.monotonic() < end:
        for e in fleet.poll([f for f in flights if f.label not in failed]):
            assert e.kind == INFRA, e
            failed[e.flight.label] = e.failure.state
        time.sleep(limits.poll_s)
    assert len(failed) == N_RUNS and set(failed.values()) == {"CANCELLED"}
