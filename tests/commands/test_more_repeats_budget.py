"""`graphsweep more-repeats` on the committed 128-expert MoE example (the decision loop stopped at decide.max_repeats
6, 0.37 of its 0.6 GPU-hours spent): what more repeats would add where the sweep runs, and which budget stops it first.
Asked on this CPU machine, where the local executor could start none of the sweep's Megatron runs."""

from __future__ import annotations

import re
import statistics

from graphsweep import cli
from graphsweep.store.tables import read_table
from graphsweep.store.timeparts import spent_by_run
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


def test_more_repeats_prices_a_paired_cells_repeats_at_what_its_pair_jobs_took(capsys, monkeypatch):
    """The paired example (one cell, six pair jobs of about 200 s each): the line's GPU-hours are the table's, what
    the seven more pair jobs would take at the six's median, not the plan's uncorrected estimate (0.306 h, below what
    they took)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    spec = ROOT / "configs" / "examples" / "megatron-moe-128e-paired.yaml"
    rc = cli.main(["more-repeats", "--dry-run", "--results", str(ROOT / "results" / "examples"), str(spec)])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0
    table = re.search(r"│ inconclusive │ 6 │ 13 │ ([0-9.]+) │", out)
    line = re.search(r"budget 6 -> 13 jobs per arm: at most 7 more runs, about ([0-9.]+) GPU-hours", out)
    assert table and line, out
    runs = read_table(ROOT / "results" / "examples" / "megatron-moe-128e-paired" / "runs.parquet", "runs")
    took = statistics.median(spent_by_run(runs).values())  # one pair job's GPU-seconds, both arms
    assert float(line.group(1)) == float(table.group(1)) == round(7 * took / 3600.0, 3)
