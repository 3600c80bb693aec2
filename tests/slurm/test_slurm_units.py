"""The Slurm pieces that need no cluster: profile lookup, sbatch parameters per launch plan, sacct parsing, the
PREEMPTED/UNKNOWN wall-clock guard, the watcher's rate limit, a lost job asked of slurmctld, a result Slurm ended,
progress and Ctrl-C messages. (Stand-ins for sacct and squeue, named so: the real ones are tests/slurm's others.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import submitit
import yaml

from graphsweep.records import LaunchPlan
from graphsweep.parse.progress import latest_iteration
from graphsweep.records import JobSide
from graphsweep.run.slurm import (
    GONE,
    InFlight,
    InfraFailure,
    JobRecord,
    Lookup,
    SacctWatcher,
    WaitLimits,
    interrupt_message,
    parse_sacct,
    progress_line,
)
from graphsweep.run.watch import INFRA, RESULT, Fleet, JobWatch, StuckGuard
from graphsweep.entry.job import job_argv
from graphsweep.run.sbatch import slurm_parameters

from tests.support import ROOT

PROFILE = ROOT / "profiles" / "slurm"


def sbatch_text(params: dict, tmp: Path) -> str:
    """The sbatch script submitit would submit with these parameters (nothing is submitted). submitit's Slurm executor
    starts only where `srun` is on PATH: without Slurm installed, a stand-in srun (never run) is put there."""
    path = os.environ["PATH"]
    if not shutil.which("srun"):
        (tmp / "srun").write_text("#!/bin/sh\nexit 1\n")
        (tmp / "srun").chmod(0o755)
        os.environ["PATH"] = f"{tmp}{os.pathsep}{path}"
    try:
        ex = submitit.AutoExecutor(folder=str(tmp / "%j"), cluster="slurm")
    finally:
        os.environ["PATH"] = path
    ex.update_parameters(**params)
    return ex._executor._make_submission_file_text("python -u -m submitit.core._submit /x", "uuid")


# --- profile -------------------------------------------------------------------------------------


@pytest.mark.snakemake
@pytest.mark.slurm  # its dry run asks Slurm where the runs would go (scontrol, sinfo: graphsweep/smk.py slurm_target)
def test_profile_is_found_as_slurm_from_the_repository_root():
    assert (ROOT / "slurm").is_symlink() and (ROOT / "slurm").resolve() == PROFILE.resolve()
    env = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent-graphsweep"}  # the user's own profiles play no part
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "slurm", "--dry-run", "--quiet", "rules"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Using profile slurm" in proc.stdout + proc.stderr


def test_profile_keeps_finished_runs_and_retries_infrastructure_failures():
    cfg = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert cfg["keep-going"] is True and cfg["rerun-incomplete"] is True and cfg["retries"] >= 1
    assert "code" not in cfg["rerun-triggers"] and {"mtime", "input", "params"} <= set(cfg["rerun-triggers"])
    # The Slurm settings travel as a config file, not `config:` (a CLI --config spec=... would replace that whole key
    # and silently run the sweep on the login node).
    assert "config" not in cfg and (PROFILE / cfg["configfiles"]).is_file()
    cluster = yaml.safe_load((PROFILE / cfg["configfiles"]).read_text())
    assert cluster["cluster"] == "slurm"
    # Every key of the shipped file is understood (would raise otherwise).
    slurm_parameters(LaunchPlan(argv=["python"]), cluster["slurm"], 10, "gs-x")


# --- sbatch parameters -----------------------------------------------------------------------------


def test_builtin_run_asks_for_its_gpu_and_one_task(tmp_path):
    params = slurm_parameters(LaunchPlan(argv=["python", "-m", "w"]), {"partition": "batch", "account": "perf"}, 20, "gs-a")
    text = sbatch_text(params, tmp_path)
    for line in ["--gpus-per-node=1", "--ntasks-per-node=1", "--nodes=1", "--partition=batch", "--account=perf",
                 "--time=20", "--job-name=gs-a"]:  # fmt: skip
        assert f"#SBATCH {line}" in text, line
    assert "srun" in text  # the submitit task itself runs as one srun task


def test_gpu_less_cluster_requests_no_gpus(tmp_path):
    params = slurm_parameters(LaunchPlan(argv=["python"]), {"request_gpus": False}, 5, "gs-a")
    assert "gpus" not in sbatch_text(params, tmp_path)


def test_multi_node_megatron_shape_gets_nodes_and_one_task_per_gpu_from_its_plan(tmp_path):
    plan = LaunchPlan(argv=["python", "entry.py"], gpus=16, nodes=2, gpus_per_node=8, tasks_per_node=8, srun=True,
                      srun_args=["--nodes=2", "--ntasks=16", "--ntasks-per-node=8"])  # fmt: skip
    slurm = {"exclusive": True, "constraint": "h100", "qos": "high", "mem_gb": 0, "sbatch": {"mail-type": "FAIL"},
             "setup": ["module load cuda"], "container_image": "nvcr.io/nvidia/nemo:25.11",
             "container_mounts": ["/lustre:/lustre"], "srun_args": ["--mpi=pmix"]}  # fmt: skip
    text = sbatch_text(slurm_parameters(plan, slurm, 30, "gs-b"), tmp_path)
    for line in ["--nodes=2", "--gpus-per-node=8", "--ntasks-per-node=8", "--exclusive", "--constraint=h100",
                 "--qos=high", "--mail-type=FAIL"]:  # fmt: skip
        assert f"#SBATCH {line}" in text, line
    assert "module load cuda" in text
    # NeMo containers have no submitit: the task runs in the batch script and starts the training as an srun step.
    assert "\nsrun" not in text
    argv = job_argv(plan, slurm)
    assert argv[0] == "srun" and argv[-2:] == ["python", "entry.py"]
    assert "--container-image=nvcr.io/nvidia/nemo:25.11" in argv and "--mpi=pmix" in argv
    assert any(a.startswith("--container-mounts=") and "/lustre:/lustre" in a for a in argv)


def test_layout_and_time_cannot_be_set_in_the_profile():
    with pytest.raises(ValueError, match="launch plan"):
        slurm_parameters(LaunchPlan(argv=["python"]), {"nodes": 4}, 5, "gs-a")
    with pytest.raises(ValueError, match="unknown setting 'partiton'"):
        slurm_parameters(LaunchPlan(argv=["python"]), {"partiton": "x"}, 5, "gs-a")


def test_short_time_limit_gets_a_signal_before_the_limit(tmp_path):
    params = slurm_parameters(LaunchPlan(argv=["python"]), {}, 1, "gs-a")
    assert "#SBATCH --signal=USR2@10" in sbatch_text(params, tmp_path)


# --- sacct, guard, cache -----------------------------------------------------------------------------


def test_parse_sacct_takes_the_first_word_of_the_state_and_the_latest_line_of_a_reused_id():
    text = "12|CANCELLED by 0|0:0|00:00:04|00:05:00|vm|None\n13|PENDING|0:0|00:00:00|00:01:00|None assigned|Priority\n"
    text += "12|RUNNING|0:0|00:00:01|00:05:00|vm|None\n"
    recs = parse_sacct(text)
    assert recs["12"].state == "RUNNING" and recs["13"].state == "PENDING" and recs["13"].reason == "Priority"


def test_stuck_guard_fires_only_after_the_limit_in_one_stuck_state():
    guard = StuckGuard(limit_s=600)
    assert guard.observe("PREEMPTED", 0) is None
    assert guard.observe("PREEMPTED", 599) is None
    assert "PREEMPTED for 601 s" in guard.observe("PREEMPTED", 601)


def test_stuck_guard_resets_when_the_job_moves_on():
    guard = StuckGuard(limit_s=600)
    guard.observe("UNKNOWN", 0)
    assert guard.observe("RUNNING", 500) is None  # requeued and running again
    assert guard.observe("UNKNOWN", 900) is None
    assert guard.observe("PREEMPTED", 1400) is None  # a different stuck state starts its own clock
    assert guard.observe("PREEMPTED", 2001) is not None


def fake_sacct(tmp_path: Path, monkeypatch, answer: str) -> Path:
    """A sacct that only counts its calls and answers `answer` (a stand-in: the real one needs the cluster)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    (bin_dir / "sacct").write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nprintf '{answer}'\n")
    (bin_dir / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return calls


def test_the_watcher_calls_sacct_at_most_once_per_interval_for_all_jobs(tmp_path, monkeypatch):
    calls = fake_sacct(tmp_path, monkeypatch, "1|RUNNING|0:0|00:00:01|00:05:00|vm|None\\n")
    watcher = SacctWatcher(interval_s=10)
    first = watcher.look(["1", "2", "3"], now=100.0)
    for t in range(20):
        assert watcher.look(["2", "3", "1"], now=100.0 + t * 0.4)["2"].queried_at == first["1"].queried_at
    assert first["1"].record.state == "RUNNING" and first["3"].record is None and first["3"].ok
    watcher.look(["1"], now=110.0)
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 and "-j 1,2,3" in lines[0] and "-j 1 " in lines[1] + " "


def test_a_failed_sacct_call_is_said_and_not_repeated_before_the_interval(tmp_path, monkeypatch):
    calls = fake_sacct(tmp_path, monkeypatch, "")
    (tmp_path / "bin" / "sacct").write_text(f"#!/bin/sh\necho x >> {calls}\necho 'slurmdbd down' >&2\nexit 1\n")
    watcher = SacctWatcher(interval_s=10)
    look = watcher.look(["7"], now=0.0)["7"]
    assert not look.ok and "slurmdbd down" in look.error
    watcher.look(["7"], now=5.0)
    assert len(calls.read_text().splitlines()) == 1


def side(job_id: str, folder: Path) -> JobSide:
    return JobSide(cluster="slurm", job_id=job_id, folder=str(folder / "%j"), log=str(folder / "log.txt"))


def test_a_reattached_job_that_finished_meanwhile_is_said_once_and_read(tmp_path, monkeypatch):
    # A killed controller's job may finish between the new controller finding its side file and its first poll: the
    # user still hears that the run was reattached, not resubmitted (CI saw this race in test_workflow_slurm).
    fake_sacct(tmp_path, monkeypatch, "")
    (tmp_path / "41").mkdir()
    submitit.core.utils.cloudpickle_dump(("success", {"exit_code": 0}), tmp_path / "41" / "41_0_result.pkl")
    said: list[str] = []
    fleet = Fleet(SacctWatcher(10), WaitLimits(), said.append)
    flight = fleet.add("cell-a.eager.r1", side("41", tmp_path), reattached=True)
    assert [e.kind for e in fleet.poll([flight], now=0.0)] == [RESULT]
    assert said == ["reattaching cell-a.eager.r1 to Slurm job 41 (finished, result present)"]


def test_a_job_sacct_lost_is_lost_only_once_slurmctld_holds_it_no_more():
    """sacct with no record past lost_after_s: slurmctld is asked; while it holds the job (the accounting lags or
    fails) it is waited for; once it does not, the run may be submitted again; when squeue fails, nothing is
    decided."""
    held = {"state": "RUNNING"}
    watch = JobWatch("5", WaitLimits(lost_after_s=60), started=0.0, ask_slurmctld=lambda _: held["state"])
    nothing = Lookup(None, queried_at=1.0, ok=True)
    watch.observe(nothing, 1.0)
    watch.observe(nothing, 62.0)  # past the limit, but slurmctld runs it: waited for, said once
    assert watch.note and "slurmctld holds it (RUNNING)" in watch.note
    watch.observe(nothing, 100.0)
    held["state"] = None  # squeue failed: cannot say
    watch.observe(nothing, 130.0)
    held["state"] = GONE
    with pytest.raises(InfraFailure, match="LOST: .*slurmctld holds it no more"):
        watch.observe(nothing, 200.0)


def test_a_result_of_a_job_slurm_cancelled_is_an_infrastructure_failure(tmp_path, monkeypatch):
    """scancel of a running job: its training exits -15 and the job function still returns, so a result pickle
    exists; sacct's CANCELLED, looked at after the result appeared, makes it a failure that is retried."""
    calls = fake_sacct(tmp_path, monkeypatch, "9|CANCELLED by 0|0:15|00:00:12|00:05:00|vm|None\\n")
    (tmp_path / "9").mkdir()
    submitit.core.utils.cloudpickle_dump(("success", {"exit_code": -15}), tmp_path / "9" / "9_0_result.pkl")
    fleet = Fleet(SacctWatcher(10), WaitLimits(result_grace_s=30), lambda _: None)
    flight = fleet.add("s.eager.r1", side("9", tmp_path))
    events = fleet.poll([flight], now=100.0)
    assert [(e.kind, e.failure.state) for e in events] == [(INFRA, "CANCELLED")]
    assert "exit code -15 is Slurm stopping it" in str(events[0].failure)
    assert len(calls.read_text().splitlines()) == 1


def test_a_failed_training_in_a_job_that_completed_is_the_runs_result(tmp_path, monkeypatch):
    fake_sacct(tmp_path, monkeypatch, "8|COMPLETED|0:0|00:00:12|00:05:00|vm|None\\n")
    (tmp_path / "8").mkdir()
    submitit.core.utils.cloudpickle_dump(("success", {"exit_code": 1}), tmp_path / "8" / "8_0_result.pkl")
    fleet = Fleet(SacctWatcher(10), WaitLimits(), lambda _: None)
    flight = fleet.add("s.eager.r1", side("8", tmp_path))
    assert [e.kind for e in fleet.poll([flight], now=100.0)] == [RESULT]


def test_latest_iteration_reads_megatron_iteration_lines_from_the_tail(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text(
        "setup\n [2026-01-01 00:00:00] iteration        1/      20 | consumed samples: 1 |\n"
        " [2026-01-01 00:00:01] iteration       12/      20 | consumed samples: 12 | elapsed time per iteration (ms): 5.0 |\n"
    )
    assert latest_iteration(log) == (12, 20)
    assert latest_iteration(tmp_path / "missing.txt") is None


def test_progress_is_one_line_with_counts_and_iterations(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(" iteration        7/      24 | x\n")
    jobs = [InFlight("11", "cell-a.eager.r1", str(log), JobRecord("11", "RUNNING", elapsed="00:01:00")),
            InFlight("12", "cell-b.eager.r1", "", JobRecord("12", "PENDING", reason="Resources")),
            InFlight("13", "cell-c.eager.r1", "", JobRecord("13", "PENDING"))]  # fmt: skip
    line = progress_line(jobs)
    assert "\n" not in line
    assert "3 in flight (2 pending, 1 running)" in line and "cell-a.eager.r1 (job 11) iteration 7/24" in line


def test_interrupt_message_names_the_jobs_and_both_ways_out():
    jobs = [InFlight("11", "cell-a.eager.r1", "", JobRecord("11", "RUNNING")), InFlight("12", "cell-b.eager.r1")]
    text = interrupt_message(jobs)
    assert "scancel 11 12" in text and "cell-a.eager.r1" in text and "run the same snakemake command" in text


def test_status_of_a_sweep_not_started_lists_every_run_as_planned(tmp_path):
    spec = tmp_path / "sweep.yaml"
    shutil.copy(ROOT / "configs" / "sweep.yaml", spec)
    res = subprocess.run([sys.executable, "-m", "graphsweep.cli", "status", str(spec)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    # a local executor on this CPU machine: the graph arms are blocked at plan time, the eager ones planned
    assert "6 planned, 24 blocked" in res.stdout and "sweep default" in res.stdout


def test_status_of_an_unknown_sweep_says_what_to_give(tmp_path):
    res = subprocess.run([sys.executable, "-m", "graphsweep.cli", "status", "nosuch"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2 and "no results for sweep 'nosuch'" in res.stderr
