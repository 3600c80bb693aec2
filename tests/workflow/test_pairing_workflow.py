"""A paired sweep (`pairing: true`) through real Snakemake + submitit on the CPU.

Each cell repeat is one job running both arms in ABBA order. On the CPU the graph cell is blocked at plan time (no
CUDA device); `verify: true` runs its pair jobs anyway, so their graph segments confirm it (blocked) while their eager
segments complete; the A/A control cell completes in both arms and is judged on
per-job log-ratios. `graphsweep more-repeats` adds no pair job for the A/A control cell alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from tests.support import ADAPTIVE_SPEC, ROOT, planned_runs, run_spec, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.snakemake]

# the adaptive-repeats sweep (one tiny shape, a CPU-blocked graph variant, an A/A cell), run as pair jobs
SPEC = {**ADAPTIVE_SPEC, "sweep": "paired", "pairing": True, "verify": True}


@pytest.fixture(scope="module")
def paired(tmp_path_factory):
    workdir = run_spec(tmp_path_factory.mktemp("paired"), "paired", SPEC)
    return workdir, workdir / "results" / "paired"


def test_plan_has_one_pair_job_per_cell_and_repeat(paired):
    _, out = paired
    plan = pd.read_parquet(out / "plan.parquet")
    assert len(plan) == 4 and set(plan.arm) == {"pair"}
    assert plan.run_id.str.contains(r"\.pair\.r[12]$").all()
    assert plan.command.str.contains("graphsweep.entry.abba").all()


def test_each_job_ran_abba_or_baab_and_kept_its_segment_logs(paired):
    _, out = paired
    for job in pd.read_parquet(out / "plan.parquet").itertuples():
        summary = json.loads((out / "runs" / job.run_id / "summary.json").read_text())
        assert summary["order"] == (["A1", "B1", "B2", "A2"] if job.repeat == 1 else ["B1", "A1", "A2", "B2"])
        for label in summary["order"]:
            assert (out / "runs" / job.run_id / "segments" / f"{label}.log").stat().st_size > 0


def test_runs_table_has_an_eager_and_a_graph_row_per_job(paired):
    _, out = paired
    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 8
    for pair_id, g in runs.groupby("pair_id"):
        assert g.job_id.nunique() == 1 and len(g) == 2
        other = "control" if pair_id.split(".")[1] == "aa" else "graph"
        assert sorted(g.arm) == sorted(["eager", other])
        job = json.loads((out / "runs" / pair_id / "run.json").read_text())
        assert g.gpu_seconds.sum() == pytest.approx(job["gpu_seconds"], abs=0.01)  # the job's time, once
    graph = runs[runs.arm == "graph"]
    assert set(graph.outcome) == {"blocked"}
    assert set(runs[runs.arm != "graph"].outcome) == {"completed"}


def test_verdicts_blocked_graph_cell_and_a_paired_control_cell(paired):
    _, out = paired
    cmp = pd.read_parquet(out / "comparison.parquet").set_index("variant")
    assert cmp.loc["full_iteration", "verdict"] == "blocked"
    assert "CUDA graphs need a CUDA device" in cmp.loc["full_iteration", "reason"]
    aa = cmp.loc["aa"]
    # two pair jobs are a thin design: judged unpaired with the spread allowance, inconclusive whatever the CPU did
    assert aa.verdict == "inconclusive" and aa.thin and aa.design == "unpaired"
    assert list(aa.eager_run_ids) == [f"{aa.cell_id}.pair.r{k}.eager" for k in (1, 2)]


def test_more_repeats_adds_no_pair_job_for_a_control_cell_alone(paired):
    """The decision loop repeats cells that can still be decided; an A/A control is judged at its shape's looks but is
    never a reason for repeats of its own (before the loop, more-repeats added pair jobs for it)."""
    workdir, out = paired
    cmp = pd.read_parquet(out / "comparison.parquet").set_index("variant")
    assert cmp.loc["aa", "verdict"] == "inconclusive" and cmp.loc["aa", "loop_status"] == "control"
    cmd = [sys.executable, "-m", "graphsweep.cli", "more-repeats", "configs/paired.yaml", "--max-repeats", "3"]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no cell is undecided for want of repeats; nothing to add" in proc.stdout
    assert not (out / "extra_repeats.yaml").exists()
    dry = snakemake(workdir, "--cores", "2", "--config", "spec=configs/paired.yaml", "-n")
    assert planned_runs(dry.stdout + dry.stderr) == set()