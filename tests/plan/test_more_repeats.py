"""Adaptive repeats on the real workflow: `graphsweep more-repeats` after a CPU sweep adds exactly the new runs of
the inconclusive cells, and the next `snakemake` touches nothing finished.

The sweep has an A/A control cell (eager vs eager: completes on the CPU) and a practical margin of 0.0001 %, so
two repeats per arm cannot call the control cell neutral; and two jobs per arm are a thin design (the spread
allowance, graphsweep/judge/interval.py), which decides only a difference beyond 1.83x at the first look's alpha:
the control cell is inconclusive whatever the CPU's timings, so the test needs no luck.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from graphsweep.plan import repeats
from graphsweep.sweepspec.load import load_spec
from tests.support import ADAPTIVE_SPEC as SPEC
from tests.support import ROOT, copy_workflow, planned_runs, run_spec, snakemake


def finished_files(out) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted((out / "runs").glob("*/*")) if p.is_file()}


def more_repeats(workdir, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "graphsweep.cli", "more-repeats", "configs/adaptive.yaml", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    workdir = run_spec(tmp_path_factory.mktemp("adaptive"), "adaptive", SPEC)
    out = workdir / "results" / "adaptive"
    cmp = pd.read_parquet(out / "comparison.parquet")
    inconclusive = set(cmp.cell_id[cmp.verdict == "inconclusive"])
    assert len(inconclusive) == 1, dict(zip(cmp.cell_id, cmp.reason))  # the thin A/A control cell, and only it
    judged = cmp[cmp.verdict != "blocked"]  # a preflight-blocked cell has no interval
    assert judged.alpha.tolist() == pytest.approx([0.025] * len(judged))  # an adaptive sweep's first look: half of alpha
    return workdir, out, inconclusive


@pytest.mark.slow
@pytest.mark.snakemake
def test_more_repeats_plans_only_inconclusive_cells_and_the_dry_run_lists_only_new_runs(swept):
    workdir, out, inconclusive = swept
    before = finished_files(out)
    proc = more_repeats(workdir, "--target-repeats", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "GPU-hours" in proc.stdout
    extra = repeats.read_extra(out / "extra_repeats.yaml")
    assert set(extra) == inconclusive and set(extra.values()) == {3}
    spec = load_spec(workdir / "configs" / "adaptive.yaml")
    shape = spec.cells()[0].shape_id
    # the control cell's third repeat and its shape's third eager baseline run, nothing for the blocked cell
    expected = {f"{cell}.r3" for cell in inconclusive} | {f"{shape}.eager.r3"}
    for run_id in expected:
        assert run_id in proc.stdout
    dry = snakemake(workdir, "--cores", "2", "--config", "spec=configs/adaptive.yaml", "-n")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert planned_runs(dry.stdout + dry.stderr) == expected

    # the real rerun adds them and leaves every finished run's files as they were
    proc = snakemake(workdir, "--cores", "2", "--config", "spec=configs/adaptive.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    after = finished_files(out)
    assert {k: v for k, v in after.items() if k in before} == before
    assert {p.split("/runs/")[1].split("/")[0] for p in set(after) - set(before)} == expected
    cmp = pd.read_parquet(out / "comparison.parquet").set_index("cell_id")
    for cell in inconclusive:
        assert (cmp.loc[cell, "n_eager"], cmp.loc[cell, "n_graph"]) == (3, 3)
        assert len(cmp.loc[cell, "graph_run_ids"]) == 3
    # nothing is left to do
    again = snakemake(workdir, "--cores", "2", "--config", "spec=configs/adaptive.yaml", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
@pytest.mark.snakemake
def test_plan_records_the_extra_repeats(swept):
    from graphsweep.store.tables import table_info

    workdir, out, inconclusive = swept
    if not (out / "extra_repeats.yaml").exists():  # run on its own (-k): plan and run the extra repeats here
        assert more_repeats(workdir, "--target-repeats", "3").returncode == 0
        assert snakemake(workdir, "--cores", "2", "--config", "spec=configs/adaptive.yaml").returncode == 0
    assert set(table_info(out / "plan.parquet")["extra"]["extra_repeats"]) == inconclusive


@pytest.mark.snakemake
def test_a_broken_extra_repeats_file_stops_the_workflow_with_the_key(tmp_path):
    workdir = copy_workflow(tmp_path)
    (workdir / "configs" / "adaptive.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    bad = workdir / "results" / "adaptive" / "extra_repeats.yaml"
    bad.parent.mkdir(parents=True)
    bad.write_text("repeats:\n  some.cell: many\n")
    proc = snakemake(workdir, "--cores", "2", "--config", "spec=configs/adaptive.yaml", "-n")
    assert proc.returncode != 0
    assert "repeats.some.cell" in proc.stderr + proc.stdout and "'many'" in proc.stderr + proc.stdout


@pytest.mark.slow
def test_more_repeats_without_results_says_what_to_run(tmp_path):
    workdir = copy_workflow(tmp_path)
    (workdir / "configs" / "adaptive.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    proc = more_repeats(workdir)
    assert proc.returncode == 2
    assert "comparison.parquet does not exist" in proc.stderr and "snakemake" in proc.stderr


def test_more_repeats_refuses_a_sweep_that_spent_its_alpha_at_the_first_look(tmp_path):
    """A second look at alpha 0.05 raises the false-verdict rate (docs/statistics.md): the spec must say so first."""
    workdir = copy_workflow(tmp_path)
    (workdir / "configs" / "adaptive.yaml").write_text(yaml.safe_dump({**SPEC, "adaptive_repeats": False}))
    spec = load_spec(workdir / "configs" / "adaptive.yaml")
    inconclusive = pd.DataFrame({"cell_id": [c.cell_id for c in spec.cells()], "verdict": "inconclusive"})
    with pytest.raises(repeats.RepeatsError, match="key 'adaptive_repeats' = false: the verdicts spent all of alpha"):
        repeats.plan_more_repeats(spec, inconclusive, None)
    extra = {c.cell_id: 3 for c in spec.cells()}
    again = load_spec(workdir / "configs" / "adaptive.yaml").with_extra_repeats(extra)
    again.raw["adaptive_repeats"] = True
    plans = repeats.plan_more_repeats(again, inconclusive, None)
    assert plans and all(p.new_runs == [] and "second look already" in p.why for p in plans)  # no third look


@pytest.mark.slow
@pytest.mark.snakemake
def test_the_plan_job_writes_only_the_configs_that_changed_and_queues_only_their_runs(swept, tmp_path):
    """The plan job writes each run's config.yaml (no job per run for it): a spec edit that changes no run's config
    writes the plan again and leaves every config.yaml as it was, its mtime too, and queues no run; a setting in
    every run's config queues every run again (same ids); a deleted run folder queues exactly that run."""
    workdir, _, _ = swept
    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy, symlinks=True)  # copy2: mtimes and Snakemake's records kept
    spec_path, out = copy / "configs" / "adaptive.yaml", copy / "results" / "adaptive"
    (out / "owner.json").unlink()  # it names the original's spec path: the copy's spec takes the folder over
    configs = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted((out / "runs").glob("*/config.yaml"))}
    raw = yaml.safe_load(spec_path.read_text())
    raw["margin"] = 2 * raw["margin"]  # the judge's, in no run's config
    spec_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = snakemake(copy, "--cores", "2", "--config", "spec=configs/adaptive.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^(local)?rule plan:", proc.stdout + proc.stderr, re.M) and not planned_runs(proc.stdout + proc.stderr)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in configs} == configs

    victim = sorted(configs)[0].parent
    shutil.rmtree(victim)
    dry = snakemake(copy, "--cores", "2", "--config", "spec=configs/adaptive.yaml", "-n")
    assert dry.returncode == 0 and planned_runs(dry.stdout + dry.stderr) == {victim.name}, dry.stderr[-3000:]

    raw["executor"]["timeout_min"] += 1  # in every run's config.yaml, not in its id
    spec_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    dry = snakemake(copy, "--cores", "2", "--config", "spec=configs/adaptive.yaml", "-n")
    assert dry.returncode == 0 and planned_runs(dry.stdout + dry.stderr) == {p.parent.name for p in configs}
