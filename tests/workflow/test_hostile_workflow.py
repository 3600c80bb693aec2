"""Issue 29 through real Snakemake runs: a hostile spec or workflow setting stops the workflow with one line before
anything is planned or submitted; a run folder linked out of the results is refused before a job writes through it;
and Ctrl-C as the last jobs finish says the sweep is done, not that it stopped before its end.

The in-process half (every case of the CLI): tests/house/test_hostile_input.py. The Slurm half:
tests/slurm/test_slurm_settings.py.
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from graphsweep.layout import SweepPaths
from tests.support import ROOT, copy_workflow, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.snakemake]

BASE = yaml.safe_load((ROOT / "configs" / "sweep.yaml").read_text())


def _spec(**changes) -> dict:
    spec = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split("/")
        node = spec
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return spec


def _last_line(proc: subprocess.CompletedProcess, start: str, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(start), proc.stderr[-3000:]
    for needle in needles:
        assert needle in last, (needle, last)
    return last


@pytest.mark.parametrize("spec, needles", [
    (_spec(**{"executor/slurm/comment": "x\ntouch pwned #"}), ["executor.slurm.comment", "a newline (U+000A)"]),
    (_spec(**{"workload/env": {"A;touch pwned;B": "1"}}), ["workload.env.A;touch pwned;B", "environment variable"]),
    (_spec(budget_gpu_hours=float("nan")), ["budget_gpu_hours", "not a finite number"]),
    (_spec(margin=float("nan")), ["key 'margin' = NaN"]),
    (_spec(**{"executor/slurm/status_interval_s": 1.0e300}),
     ["key 'executor.slurm.status_interval_s' = 1e+300", "greater than the maximum of 600"]),
], ids=["newline comment", "env name", "budget nan", "margin nan", "interval 1e300"])  # fmt: skip
def test_a_hostile_spec_stops_snakemake_with_one_line_and_no_job(tmp_path, spec, needles):
    workdir = copy_workflow(tmp_path / "wf")
    (workdir / "configs" / "bad.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = snakemake(workdir, "--cores", "1", "--config", "spec=configs/bad.yaml")
    _last_line(proc, "graphsweep: invalid sweep spec:", "configs/bad.yaml", *needles)
    assert not (workdir / "results").exists() and not (workdir / "pwned").exists()


@pytest.mark.parametrize("settings, needles", [
    ({"cluster": "slurm", "slurm": {"partition": "batch\ntouch pwned #"}}, ["key 'slurm.partition'", "a newline"]),
    ({"slurm": {"sbatch": {"mail-type --wrap=id": "x"}}}, ["key 'slurm.sbatch.mail-type --wrap=id'", "not a name"]),
    ({"slurm": {"status_interval_s": float("inf")}}, ["key 'slurm.status_interval_s' = inf", "not a finite number"]),
    ({"results": "res\x1b[2Jults"}, ["key 'results'", "an escape (ESC)"]),
    # every interval and limit in a range: 1e+300 s between sacct calls would wait for ever without one
    ({"slurm": {"status_interval_s": 1.0e300}}, ["key 'slurm.status_interval_s' = 1e+300", "maximum of 600"]),
    ({"slurm": {"lost_after_min": 0}}, ["key 'slurm.lost_after_min' = 0", "minimum of 0"]),
    ({"slurm": {"progress_interval_s": 0.01}}, ["key 'slurm.progress_interval_s' = 0.01", "minimum of 1"]),
], ids=["partition newline", "sbatch option", "interval inf", "results escape", "interval 1e300", "lost after 0",
        "progress 0.01"])  # fmt: skip
def test_a_hostile_workflow_setting_stops_snakemake_with_one_line(tmp_path, settings, needles):
    """What the Slurm profile's cluster.yaml (a Snakemake config file) or --configfile gives: the line names that
    file."""
    workdir = copy_workflow(tmp_path / "wf")
    (workdir / "bad.yaml").write_text(yaml.safe_dump(settings))
    proc = snakemake(workdir, "--cores", "1", "--configfile", str(workdir / "configs" / "config.yaml"),
                     str(workdir / "bad.yaml"))
    _last_line(proc, "graphsweep: invalid workflow setting (bad.yaml)", *needles)
    assert not any(p.name.startswith("res") for p in workdir.iterdir()) and not (workdir / "pwned").exists()


# --------------------------------------------------------------------------------------------------
# A finished sweep (the default one: six eager baselines on this CPU)

@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("finished"))
    proc = snakemake(workdir, "--cores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return workdir


def _copy(finished: Path, tmp_path: Path) -> tuple[Path, SweepPaths]:
    dest = tmp_path / "wf"
    shutil.copytree(finished, dest, symlinks=True)  # mtimes and .snakemake's records come along
    return dest, SweepPaths(dest / "results", "default")


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("what", ["the run folder", "runs/"])
def test_a_run_folder_linked_out_of_the_results_is_refused_and_nothing_is_written_through_it(finished, tmp_path, what):
    workdir, paths = _copy(finished, tmp_path)
    run = paths.run(sorted(p.name for p in paths.run_dirs.iterdir())[0])
    linked = run.root if what == "the run folder" else paths.run_dirs
    outside = tmp_path / "outside" / linked.name
    outside.parent.mkdir()
    shutil.move(linked, outside)
    linked.symlink_to(outside)
    # the run's derived files gone: without the refusal, parse would write them again, through the link
    for name in ("summary.json", "iterations.parquet"):
        (outside / (name if what == "the run folder" else f"{run.run_id}/{name}")).unlink()
    before = _tree(outside)
    proc = snakemake(workdir, "--cores", "2")
    _last_line(proc, "graphsweep:", f"{linked.relative_to(workdir)}: is a symbolic link to {outside}",
               "outside the sweep's folder")
    assert _tree(outside) == before  # not a byte written outside the results
    assert "[graphsweep] submitted" not in proc.stderr


def test_ctrl_c_as_the_last_job_finishes_says_the_sweep_is_done(finished, tmp_path):
    """SIGINT to the controller alone (`kill -INT`, or a terminal whose jobs run in their own group) while the report
    job runs: Snakemake waits for that job, which writes both reports, then stops without recording it. The last
    lines say what the sweep found and how Snakemake's incomplete marks are cleared, not 'stopped before its end'."""
    workdir, paths = _copy(finished, tmp_path)
    paths.report_md.unlink()
    paths.report_html.unlink()
    out = open(workdir / "controller.txt", "w")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--cores", "2"]  # fmt: skip
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, text=True)
    log = workdir / "controller.txt"
    deadline = time.monotonic() + 300
    while "localrule report:" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)  # the job is in Snakemake's pool by now
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(300) != 0
    text = log.read_text()
    assert "Terminating processes on user request" in text, text[-3000:]
    assert paths.report_html.stat().st_mtime >= started and paths.report_md.exists()  # the job ran to its end
    ours = [line for line in text.splitlines() if line.startswith("graphsweep:")]
    assert ours[-3] == "graphsweep: sweep 'default' was interrupted, but every job had finished: 12 cells: 12 blocked"
    assert ours[-2] == f"graphsweep: report: {paths.report_html.resolve()}"
    assert ours[-1].startswith("graphsweep: Snakemake stopped before recording the last job(s) (report), so it marks "
                               "their outputs incomplete; this makes them again (no job is submitted): cd ")
    assert "stopped before its end" not in text
    command = ours[-1].split("(no job is submitted): ", 1)[1]
    again = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "[graphsweep] submitted" not in again.stderr, again.stderr[-3000:]
    assert "graphsweep: sweep 'default' done: 12 cells: 12 blocked" in again.stderr
