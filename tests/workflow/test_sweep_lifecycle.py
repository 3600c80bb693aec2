"""Results are never silently taken over or lost, and the end of a sweep says what happened (issue 14, items 5-6).

Real Snakemake runs (subprocess), the real `graphsweep` CLI and real local jobs: a second spec that reuses a sweep
name is refused, `make clean-results` keeps the archives, a Ctrl-C leaves no job that `status` calls running, a
second controller gets one line, and a sweep ends with its verdict counts, the report's path, or how to resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from graphsweep import cli
from graphsweep.store.archive import verify_archive
from graphsweep.layout import SweepPaths
from graphsweep.run.process import process_alive
from graphsweep.vocab import VERDICTS
from tests.support import ROOT, copy_workflow, snakemake

LOGS = ROOT / "tests" / "fixtures" / "logs" / "megatron-h200"
BASE = yaml.safe_load((ROOT / "configs" / "sweep.yaml").read_text())
BY_HAND = {
    "sweep": "by-hand",
    "workload": {"kind": "megatron_bridge", "recipe": "vanilla_gpt_pretrain_config"},
    "source": {"logs": str(LOGS), "pattern": r"(?P<variant>eager|te_attn|local_full)\.log"},
    "axes": {"model.seq_length": [1024]},
    "variants": [{"name": "te_attn", "impl": "transformer_engine", "scope": ["attn"]},
                 {"name": "local_full", "impl": "local", "scope": ["full_iteration"]}],
    "repeats": 1,
    "warmup": 3,
    "iterations": 26,
}  # fmt: skip


def write(path: Path, spec: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_cli(capsys, *argv: object) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------------------------------------------
# One results folder per sweep spec


def test_a_second_spec_with_the_same_sweep_name_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    owner = write(tmp_path / "mine.yaml", BASE)
    paths = SweepPaths("results", "default")
    assert run_cli(capsys, "plan", owner)[0] == 0
    record = json.loads(paths.owner.read_text())
    assert record["spec"] == str(owner.resolve()) and record["sweep"] == "default"
    plan_before = paths.plan.read_bytes()

    other = write(tmp_path / "theirs.yaml", {**BASE, "axes": {"hidden": [256], "micro_batch": [1]}, "exclude": []})
    for command in (["plan"], ["more-repeats"]):
        rc, _, err = run_cli(capsys, *command, other)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, err
        assert str(owner.resolve()) in lines[0] and "theirs.yaml" in lines[0] and "`sweep:` name" in lines[0]
    assert paths.plan.read_bytes() == plan_before  # nothing taken over
    assert json.loads(paths.owner.read_text()) == record


def test_growth_and_the_owners_own_edits_are_the_same_sweep(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    owner = write(tmp_path / "mine.yaml", BASE)
    paths = SweepPaths("results", "default")
    assert run_cli(capsys, "plan", owner)[0] == 0
    first = json.loads(paths.owner.read_text())
    # a copy elsewhere with more repeats, another description and executor: the same sweep, the owner stays
    grown = {**BASE, "repeats": 4, "description": "more", "executor": {"cluster": "local", "timeout_min": 30}}
    assert run_cli(capsys, "plan", write(tmp_path / "copy" / "grown.yaml", grown))[0] == 0
    assert json.loads(paths.owner.read_text()) == first
    # the owner's own file, edited: accepted, and the record follows the new identity
    write(owner, {**BASE, "axes": {**BASE["axes"], "hidden": [64, 128, 256]}})
    assert run_cli(capsys, "plan", owner)[0] == 0
    second = json.loads(paths.owner.read_text())
    assert second["identity"] != first["identity"] and second["previous"]["identity"] == first["identity"]
    # the copy of the old content is now another sweep
    rc, _, err = run_cli(capsys, "plan", tmp_path / "copy" / "grown.yaml")
    assert rc == 2 and "belongs to" in err


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished (ingested) sweep: Snakemake's own output kept."""
    workdir = copy_workflow(tmp_path_factory.mktemp("lifecycle"))
    write(workdir / "configs" / "by-hand.yaml", BY_HAND)
    proc = snakemake(workdir, "--cores", "1", "--config", "spec=configs/by-hand.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return workdir, proc


@pytest.mark.slow
@pytest.mark.snakemake
def test_the_end_of_a_sweep_says_the_verdicts_and_where_the_report_is(finished):
    workdir, proc = finished
    paths = SweepPaths(workdir / "results", "by-hand")
    counts = pd.read_parquet(paths.comparison).verdict.value_counts()
    lines = proc.stderr.strip().splitlines()
    done = next(i for i, line in enumerate(lines) if line.startswith("graphsweep: sweep 'by-hand' done:"))
    assert lines[done] == (f"graphsweep: sweep 'by-hand' done: {counts.sum()} cells: "
                           + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts))  # fmt: skip
    assert lines[done + 1] == f"graphsweep: report: {paths.report_html.resolve()}"
    assert all(line.startswith(("Complete log", "Elapsed time")) for line in lines[done + 2:]), lines[done:]
    assert not paths.controller.exists()  # released


@pytest.mark.slow
@pytest.mark.snakemake
def test_snakemake_refuses_a_second_spec_and_touches_nothing(finished):
    workdir, _ = finished
    paths = SweepPaths(workdir / "results", "by-hand")
    stamp = {p: p.stat().st_mtime_ns for p in paths.root.rglob("*") if p.is_file()}
    write(workdir / "configs" / "other.yaml", {**BY_HAND, "iterations": 27})
    proc = snakemake(workdir, "--cores", "1", "--config", "spec=configs/other.yaml")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("graphsweep: ") and "belongs to" in last and "configs/other.yaml" in last
    assert {p: p.stat().st_mtime_ns for p in paths.root.rglob("*") if p.is_file()} == stamp


@pytest.mark.slow
@pytest.mark.snakemake
def test_archive_logs_false_as_the_readme_writes_it(finished):
    workdir, _ = finished
    proc = snakemake(workdir, "--cores", "1", "archive", "--config", "spec=configs/by-hand.yaml", "archive_logs=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (archive,) = (workdir / "results" / "by-hand" / "archive").glob("*.tar.gz")
    v = verify_archive(archive)
    assert v.ok and v.manifest["logs_included"] is False, v.problems


def test_make_clean_results_keeps_the_archives(tmp_path):
    default = tmp_path / "results" / "default"
    (default / "archive").mkdir(parents=True)
    (default / "archive" / "default-20300102T030405Z.tar.gz").write_bytes(b"kept")
    (default / "runs" / "r1").mkdir(parents=True)
    (default / "plan.parquet").write_bytes(b"x")
    (default / ".jobs").mkdir()
    (tmp_path / ".snakemake").mkdir()
    subprocess.run(["make", "-s", "-C", str(tmp_path), "-f", str(ROOT / "Makefile"), "clean-results"], check=True)
    assert [p.relative_to(tmp_path).as_posix() for p in sorted(tmp_path.rglob("*"))] == [
        "results", "results/default", "results/default/archive", "results/default/archive/default-20300102T030405Z.tar.gz"]


def test_make_sweep_prints_no_rule_listing():
    proc = subprocess.run(["make", "-n", "-C", str(ROOT), "sweep"], capture_output=True, text=True, check=True)
    (line,) = [line for line in proc.stdout.splitlines() if "bin/snakemake" in line]
    assert "--quiet rules host" in line  # nor the host banner: progress and graphsweep's own lines


# --------------------------------------------------------------------------------------------------
# Ctrl-C, status, and a second controller (real local jobs)

SLOW = {"sweep": "slow", "workload": {"kind": "builtin"}, "axes": {"hidden": [64]},
        "fixed": {"layers": 2, "heads": 4, "seq_length": 64, "vocab": 512, "micro_batch": 1},
        "variants": [{"impl": "full_iteration"}], "repeats": 1, "warmup": 3, "iterations": 3000,
        "executor": {"cluster": "local", "timeout_min": 10}}  # fmt: skip


def _wait_for(predicate, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.snakemake
def test_ctrl_c_a_second_controller_status_and_resume(tmp_path):
    workdir = copy_workflow(tmp_path)
    write(workdir / "configs" / "slow.yaml", SLOW)
    paths = SweepPaths(workdir / "results", "slow")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", "--config", "spec=configs/slow.yaml"]  # fmt: skip
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for(lambda: list(paths.root.glob(".jobs/*.eager.r1/job.json")))  # the eager run is in flight
        (eager,) = [p.parent.name for p in paths.root.glob(".jobs/*.eager.r1/job.json")]
        # a second controller on the same sweep: one line, no IncompleteFilesException, nothing submitted
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert second.returncode != 0 and "IncompleteFilesException" not in second.stderr
        last = second.stderr.strip().splitlines()[-1]
        assert f"being run by another controller (pid {first.pid} " in last, second.stderr[-2000:]
        # Ctrl-C: the terminal sends SIGINT to the whole foreground process group
        os.killpg(first.pid, signal.SIGINT)
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    # the local job ended with its controller: its process is gone the moment the controller has exited
    side = json.loads(paths.jobs(eager).side.read_text())
    assert process_alive(side["job_id"], side["host"], side["pid_start"]) is False, side
    resume = [line for line in stderr.splitlines() if "stopped before its end" in line]
    assert len(resume) == 1, stderr[-3000:]
    after = stderr.split(resume[0], 1)[1]
    assert "Traceback" not in after and "KeyboardInterrupt" not in after, after  # submitit's own goes to its folder
    command = resume[0].split("a rerun submits only the rest: ", 1)[1]
    assert command.startswith("cd ") and "-m snakemake" in command and "spec=configs/slow.yaml" in command
    assert not paths.controller.exists()
    # status: the interrupted local job is not running any more
    status = subprocess.run([sys.executable, "-m", "graphsweep.cli", "status", "--json", "--results",
                             str(workdir / "results"), "slow"], capture_output=True, text=True, check=True)  # fmt: skip
    states = {r["run_id"]: r for r in map(json.loads, status.stdout.splitlines())}
    assert paths.jobs(eager).side.exists() and states[eager]["state"] == "failed", states
    assert "not running" in states[eager]["detail"]
    # the printed command resumes the sweep to its end
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "graphsweep: sweep 'slow' done: 1 cells:" in done.stderr


def _trainings(workdir: Path) -> list[int]:
    """The training processes of this sweep's local jobs: the builtin entry, in the environment submitit's local
    controller gives its tasks (SUBMITIT_LOCAL_COMMAND names the job's folder under workdir)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"graphsweep.entry.builtin" in cmd and str(workdir).encode() in env:
            found.append(int(pid))
    return found


def _children(pid: int) -> list[int]:
    out = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(p))
        except (OSError, IndexError, ValueError):
            continue
    return out


@pytest.mark.slow
@pytest.mark.snakemake
@pytest.mark.parametrize("killed", ["the controller", "the controller and the run rule"])
def test_a_killed_controllers_local_job_never_trains_beside_the_reruns(tmp_path, killed):
    """Issue 38 item 3: kill -9 of the controller's main process (the OOM killer, a closed terminal) left the run rule's
    process and its local job behind, and after --unlock and --rerun-incomplete both trained at once. The run rule's
    process now stops its job as soon as its controller is gone; where it was killed too, the rerun stops the job its
    side file names, and confirms it gone, before it starts its own."""
    workdir = copy_workflow(tmp_path)
    write(workdir / "configs" / "slow.yaml", SLOW)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", "--config", "spec=configs/slow.yaml"]  # fmt: skip
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: len(_trainings(workdir)) == 1, 180)  # the eager run trains
        rule = [c for c in _children(first.pid) if b"run.py" in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert len(rule) == 1, rule
        os.kill(first.pid, signal.SIGKILL)
        if killed != "the controller":
            os.kill(rule[0], signal.SIGKILL)  # its local job is an orphan nobody waits for
        first.wait(30)
        if killed == "the controller":  # the run rule's process saw its parent go and stopped the job
            _wait_for(lambda: not _trainings(workdir), 60)
        assert subprocess.run(cmd + ["--unlock"], capture_output=True, timeout=300).returncode == 0
        rerun = subprocess.Popen(cmd + ["--rerun-incomplete"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True)  # fmt: skip
        most = 0
        while rerun.poll() is None:
            most = max(most, len(_trainings(workdir)))
            time.sleep(0.2)
        _, stderr = rerun.communicate()
    finally:
        for proc in (first, locals().get("rerun")):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert rerun.returncode == 0, stderr[-3000:]
    assert most == 1, f"{most} trainings of the run at once"
    assert ("still runs: stopping it before a new one starts" in stderr) == (killed != "the controller"), stderr[-3000:]
    assert "graphsweep: sweep 'slow' done: 1 cells:" in stderr
