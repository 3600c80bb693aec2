"""The default sweep through real Snakemake + real submitit (local executor) in a scratch directory.

On this CPU machine every graph arm is blocked at plan time (a local executor, no CUDA device: no job is started for
it) and every eager baseline completes with real timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import yaml

from graphsweep.sweepspec.load import load_spec
from tests.support import ROOT, copy_workflow, planned_runs, snakemake

pytestmark = pytest.mark.snakemake


@pytest.fixture(scope="module")
def default_sweep(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("default"))
    proc = snakemake(workdir, "--cores", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return workdir, proc


@pytest.mark.slow
def test_every_table_of_the_data_flow_is_written(default_sweep):
    workdir, _ = default_sweep
    out = workdir / "results" / "default"
    for name in ["plan.parquet", "runs.parquet", "iterations.parquet", "comparison.parquet", "report.md", "report.html"]:
        assert (out / name).stat().st_size > 0, name


@pytest.mark.slow
def test_comparison_has_one_row_per_cell_with_the_promised_columns(default_sweep):
    workdir, _ = default_sweep
    spec = load_spec(workdir / "configs" / "sweep.yaml")
    comparison = pd.read_parquet(workdir / "results/default/comparison.parquet")
    assert sorted(comparison.cell_id) == sorted(c.cell_id for c in spec.cells())
    for column in ["sweep", "cell_id", "variant", "impl", "scope", "hidden", "micro_batch", "verdict", "reason",
                   "eager_step_ms", "graph_step_ms", "speedup", "ci_low", "ci_high", "eager_mem_gb",
                   "graph_mem_gb", "eager_run_id", "graph_run_id"]:  # fmt: skip
        assert column in comparison.columns, column


@pytest.mark.slow
def test_on_cpu_graph_rows_are_blocked_by_the_missing_cuda_device(default_sweep):
    workdir, _ = default_sweep
    comparison = pd.read_parquet(workdir / "results/default/comparison.parquet")
    assert set(comparison.verdict) == {"blocked"}
    assert all("CUDA graphs need a CUDA device" in r for r in comparison.reason)
    assert set(comparison.rule_id) == {"no_cuda_here"} and (comparison.gpu_seconds == 0).all()


@pytest.mark.slow
def test_on_cpu_the_report_says_no_cuda_device_and_points_at_the_h200_report(default_sweep):
    """Issue 37 item 7: the default sweep on a CPU shows nothing of the graphs; the report says why in its own words
    (never "stay eager": no graph was measured) and where the same sweep's H200 figures are."""
    workdir, _ = default_sweep
    md = (workdir / "results/default/report.md").read_text()
    heads = [line for line in md.splitlines() if line.startswith("- **")]
    assert len(heads) == 3 and all(line.endswith("**no CUDA device here**: graph arms blocked; the eager baselines ran")
                                   for line in heads), heads
    assert "stay eager" not in md
    pointer = "results/examples/h200-builtin/report.html"
    assert f"`{pointer}` in the graphsweep repository" in md and (ROOT / pointer).is_file()
    page = (workdir / "results/default/report.html").read_text()
    assert page.count('<span class="rec-eager">no CUDA device here</span>') == 3 and f"<code>{pointer}</code>" in page


def test_on_cpu_no_job_is_started_for_a_graph_arm(default_sweep):
    workdir, proc = default_sweep
    plan = pd.read_parquet(workdir / "results/default/plan.parquet")
    graph = plan[plan.arm == "graph"]
    assert len(graph[graph.look == 1]) == 24 and set(graph.status) == {"blocked"}  # every look's graph runs
    ran = {p.name for p in (workdir / "results/default/runs").iterdir()}
    # six eager baselines, nothing else: no cell could be timed, so the loop took no second look
    assert ran == set(plan.run_id[(plan.arm == "eager") & (plan.look == 1)])
    assert proc.stderr.count("[graphsweep] submitted ") == 6


@pytest.mark.slow
def test_eager_baselines_completed_with_real_timings(default_sweep):
    workdir, _ = default_sweep
    runs = pd.read_parquet(workdir / "results/default/runs.parquet")
    eager = runs[runs.arm == "eager"]
    assert len(eager) == 6 and set(eager.outcome) == {"completed"}
    assert (eager.step_ms_median > 0).all()
    it = pd.read_parquet(workdir / "results/default/iterations.parquet")
    steady = it[it.run_id.isin(eager.run_id)]
    assert len(steady) == 6 * 24  # warmup 3 + capture slot 1 + 20 measured
    assert steady.elapsed_ms.gt(0).all()


@pytest.mark.slow
def test_each_run_records_its_job(default_sweep):
    workdir, _ = default_sweep
    for run_json in (workdir / "results/default/runs").glob("*/run.json"):
        info = json.loads(run_json.read_text())
        for key in ["executor", "job_id", "host", "start_utc", "end_utc", "exit_code", "state", "attempt"]:
            assert info.get(key) is not None, (run_json, key)
        assert info["executor"] == "local"
        assert (run_json.parent / "log.txt").stat().st_size > 0
        cfg = yaml.safe_load((run_json.parent / "config.yaml").read_text())
        assert cfg["run"]["run_id"] == run_json.parent.name


@pytest.mark.slow
def test_parquet_reads_back_with_duckdb(default_sweep):
    workdir, _ = default_sweep
    path = workdir / "results/default/comparison.parquet"
    n = duckdb.connect().execute(f"select count(*) from read_parquet('{path}') where verdict = 'blocked'").fetchone()[0]
    assert n == 12


@pytest.mark.slow
def test_overhead_benchmark_reads_a_finished_sweep(default_sweep):
    # benchmarks/pipeline_overhead.py is what issue 8 runs on the H200 results: it must read what the workflow writes
    workdir, _ = default_sweep
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pipeline_overhead.py"),
                           str(workdir / "results" / "default")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "6 runs ran, 6 logged iterations" in proc.stdout  # 6 eager baselines train; graph arms never start
    assert "train_loop_s" in proc.stdout and "against a training loop of" in proc.stdout


@pytest.mark.slow
def test_second_run_has_nothing_to_do_and_says_the_sweep_is_complete(default_sweep):
    workdir, _ = default_sweep
    proc = snakemake(workdir, "--cores", "2", "-n")
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr
    again = snakemake(workdir, "--cores", "2")
    report = workdir / "results" / "default" / "report.html"
    assert again.returncode == 0 and again.stderr.strip().splitlines()[-3:] == [
        "graphsweep: sweep 'default' is complete, nothing to run: 12 cells: 12 blocked",
        NO_CUDA_LINE,
        f"graphsweep: report: {report.resolve()}",
    ], again.stderr[-2000:]


# issue 37 item 7: a sweep whose graph arms this machine cannot run says so, and where an H200 ran them
H200_REPORT = ROOT / "results" / "examples" / "h200-builtin" / "report.html"
NO_CUDA_LINE = ("graphsweep: no CUDA device here: graph arms blocked; the eager baselines ran. What graph variants of "
                f"this workload did on an H200: {H200_REPORT}")


def test_on_cpu_the_sweep_ends_saying_no_cuda_here_and_pointing_to_the_h200_report(default_sweep):
    workdir, proc = default_sweep
    ours = [line for line in proc.stderr.splitlines() if line.startswith("graphsweep: ")]
    assert ours[-3:] == [
        "graphsweep: sweep 'default' done: 12 cells: 12 blocked",
        NO_CUDA_LINE,
        f"graphsweep: report: {(workdir / 'results' / 'default' / 'report.html').resolve()}",
    ], proc.stderr[-2000:]
    assert H200_REPORT.is_file() and "h200-builtin" in H200_REPORT.read_text()


@pytest.mark.slow
def test_a_local_megatron_sweep_on_cpu_starts_no_job_and_says_why(tmp_path):
    """Issue 37 items 5 and 7: every Megatron run needs a CUDA device, eager included; none is started."""
    workdir = copy_workflow(tmp_path)
    proc = snakemake(workdir, "--cores", "2", "--config", "spec=configs/examples/megatron-tiny-vanilla-gpt.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[graphsweep] submitted " not in proc.stderr and not (workdir / "results" / "megatron-tiny-vanilla-gpt" /
                                                                 "runs").exists()
    out = workdir / "results" / "megatron-tiny-vanilla-gpt"
    comparison = pd.read_parquet(out / "comparison.parquet")
    assert list(comparison.verdict) == ["blocked"] * 3 and set(comparison.rule_id) == {"no_cuda_here"}
    plan = pd.read_parquet(out / "plan.parquet")
    eager = plan[plan.arm == "eager"]
    assert set(plan.status) == {"blocked"} and eager.rule_message.str.startswith(
        "megatron_bridge training needs a CUDA device; this machine has none (no NVIDIA driver)").all()
    example = ROOT / "results" / "examples" / "megatron-tiny-vanilla-gpt" / "report.html"
    ours = [line for line in proc.stderr.splitlines() if line.startswith("graphsweep: ")]
    assert ours[-2] == (
        "graphsweep: no CUDA device here: every run blocked; none ran. What graph variants of this workload did on an "
        f"H200: {example}")
    assert (out / "report.html").stat().st_size > 0


@pytest.mark.slow
def test_a_moved_venv_requeues_no_finished_run(default_sweep, tmp_path):
    """The same controller from another path (the venv moved or made again elsewhere): its interpreter's path is in
    no run's command, so Snakemake's params of every finished run are unchanged and nothing runs again."""
    workdir, _ = default_sweep
    moved = tmp_path / "moved-venv"
    moved.symlink_to(Path(sys.prefix), target_is_directory=True)
    python = moved / "bin" / "python"
    here = subprocess.run([python, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True, check=True)
    assert here.stdout.strip() == str(python)  # what the plan used to bake into every builtin command
    proc = snakemake(workdir, "--cores", "2", "-n", python=python)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert planned_runs(proc.stdout + proc.stderr) == set() and "Nothing to be done" in proc.stdout + proc.stderr
    configs = list((workdir / "results" / "default" / "runs").glob("*/config.yaml"))
    assert configs and {yaml.safe_load(c.read_text())["launch"]["argv"][0] for c in configs} == {"python"}


def test_broken_spec_stops_before_anything_runs(tmp_path):
    workdir = copy_workflow(tmp_path)
    spec = workdir / "configs" / "sweep.yaml"
    raw = yaml.safe_load(spec.read_text())
    raw["axes"]["micro_batch"] = "two"
    spec.write_text(yaml.safe_dump(raw))
    proc = snakemake(workdir, "--cores", "2")
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "configs/sweep.yaml" in text and "axes.micro_batch" in text and "'two'" in text
    assert not (workdir / "results").exists()
