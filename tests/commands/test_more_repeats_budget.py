"""`graphsweep more-repeats` on the committed 128-expert MoE example (the decision loop stopped at decide.max_repeats
6, 0.37 of its 0.6 GPU-hours spent): what more repeats would add where the sweep runs, and which budget stops it first.
Asked on this CPU machine, where the local executor could start none of the sweep's Megatron runs."""

from __future__ import annotations

import re
import statistics

import pytest

from graphsweep import cli
from graphsweep.layout import SweepPaths
from graphsweep.plan import repeats as rp
from graphsweep.plan.cost import spent_of
from graphsweep.plan.planner import plan_sweep
from graphsweep.sweepspec.load import load_spec
from tests.support import ROOT

SPEC = ROOT / "configs" / "examples" / "megatron-moe-128e.yaml"


def test_more_repeats_counts_the_runs_the_gpu_would_run_and_names_the_budget_that_stops_first(capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no CUDA device here, whatever machine runs the test
    rc = cli.main(["more-repeats", "--dry-run", "--results", str(ROOT / "results" / "examples"), str(SPEC)])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0
    m = re.search(r"budget 6 -> (\d+) jobs per arm: at most (\d+) more runs, about ([0-9.]+) GPU-hours", out)
    assert m and int(m.group(2)) > 0 and float(m.group(3)) > 0, out  # not 0: the runs are blocked only here
    left = re.search(r"but decide\.gpu_hours \(0\.6 GPU-hours for the whole sweep, ([0-9.]+) left\) stops the loop "
                     r"first", out)
    assert left and 0 < float(left.group(1)) < float(m.group(3)), out
    assert "dry run: nothing written" in out


def test_more_repeats_prices_a_paired_cells_repeats_at_what_its_pair_jobs_took(monkeypatch):
    """The paired example's recorded pair jobs (about 200 s each, both arms): six more repeats of its cell cost six
    times the median pair job, as the comparison's "GPU-h more" prices them, not the plan's uncorrected estimate
    (below what the jobs took); the line more-repeats prints and the budget it checks use this."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the pair runs count although this machine could start none
    spec = load_spec(ROOT / "configs" / "examples" / "megatron-moe-128e-paired.yaml")
    paths = SweepPaths(ROOT / "results" / "examples", spec.name)
    planned = plan_sweep(spec.with_max_repeats(13))
    cell = planned[0].run.cell_id
    added = rp.new_runs(planned, 7, 13, [cell])
    took = spent_of(paths)
    assert len(added) == 6 and len(took) == 7
    assert rp.hours(added, planned, took) == pytest.approx(6 * statistics.median(took.values()) / 3600.0)
    assert rp.hours(added, planned, {}) < rp.hours(added, planned, took)  # the model's guess alone: too low
