"""The local Slurm cluster does what the workflow relies on: sbatch + sacct states, submitit submit
and reattach from a new process, time limits and scancel as sacct reports them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import cloudpickle
import pytest
import submitit

pytestmark = pytest.mark.slurm

# The job imports nothing from tests/: ship this module's functions by value, not by import path.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def sbatch(*args: str, cwd: Path) -> str:
    res = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, cwd=cwd, timeout=60)
    assert res.returncode == 0, f"sbatch {' '.join(args)} failed: {res.stderr}"
    return res.stdout.strip().split(";")[0]


def square_in_job(x: int) -> tuple[str, int]:
    """Runs on the compute node: proves it ran under Slurm by returning the job id Slurm gave it."""
    return os.environ.get("SLURM_JOB_ID", "not-in-slurm"), x * x


def slow_square_in_job(x: int) -> tuple[str, int]:
    import time

    time.sleep(3)
    return square_in_job(x)


def test_start_is_idempotent_and_status_reports_up(slurm_cluster):
    again = subprocess.run(["bash", str(slurm_cluster.script), "start"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "slurmctld: already up" in again.stdout and "slurmd: already up" in again.stdout
    status = subprocess.run(["bash", str(slurm_cluster.script), "status"], capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "DOWN" not in status.stdout


def test_sbatch_job_is_completed_in_sacct(slurm_cluster, slurm_wait, tmp_path):
    job_id = sbatch("--output", str(tmp_path / "out.txt"), "--wrap", "echo hello-from-$SLURM_JOB_ID", cwd=tmp_path)
    assert slurm_wait(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}) == "COMPLETED"
    assert (tmp_path / "out.txt").read_text().strip() == f"hello-from-{job_id}"


def test_failing_sbatch_job_is_failed_with_its_exit_code(slurm_cluster, slurm_wait, tmp_path):
    job_id = sbatch("--wrap", "exit 3", cwd=tmp_path)
    assert slurm_wait(job_id, {"COMPLETED", "FAILED"}) == "FAILED"
    exit_code = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "ExitCode"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert exit_code == "3:0"


def test_submitit_result_and_reattach_from_a_new_process(slurm_cluster, tmp_path):
    folder = tmp_path / "submitit"
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(timeout_min=5, slurm_partition=slurm_cluster.partition, cpus_per_task=1, mem_gb=1)
    job = executor.submit(slow_square_in_job, 7)

    # What the workflow's reattach does after a controller restart: only the folder and the job id survive.
    reattach = textwrap.dedent(
        f"""
        import submitit
        job = submitit.SlurmJob(folder={str(folder)!r}, job_id={job.job_id!r})
        print(repr(job.result()))
        # the result pickle exists before slurmdbd has the job's end: sacct can lag a few seconds behind
        import time
        for _ in range(60):
            state = job.get_info(mode="force")["State"]
            if state == "COMPLETED":
                break
            time.sleep(1)
        print(state)
        """
    )
    res = subprocess.run([sys.executable, "-c", reattach], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    result_line, state_line = res.stdout.strip().splitlines()[-2:]
    assert result_line == repr((job.job_id, 49))
    assert state_line == "COMPLETED"
    assert job.result() == (job.job_id, 49)


def test_scancel_shows_cancelled(slurm_cluster, slurm_wait, tmp_path):
    job_id = sbatch("--wrap", "sleep 300", cwd=tmp_path)
    slurm_wait(job_id, {"RUNNING"})
    subprocess.run(["scancel", job_id], check=True, timeout=60)
    assert slurm_wait(job_id, {"CANCELLED", "COMPLETED", "FAILED"}) == "CANCELLED"


def python_sleep_after_marker(marker: str) -> None:
    """Runs on the compute node: signals it is inside the function (submitit's handlers are set), then sleeps."""
    import time

    Path(marker).touch()
    time.sleep(300)


def wait_for_file(path: Path, deadline_s: float = 120.0) -> None:
    """Hang guard, not a timing assertion."""
    import time

    end = time.monotonic() + deadline_s
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared: the job did not reach its function"
        time.sleep(0.2)


def _submit_and_scancel(partition: str, folder: Path, wait, marker: Path, fn, *args) -> submitit.Job:
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(timeout_min=5, slurm_partition=partition, cpus_per_task=1, mem_gb=1)
    job = executor.submit(fn, *args)
    # RUNNING in sacct comes before Python has started: a SIGTERM then kills the interpreter outright.
    wait_for_file(marker)
    subprocess.run(["scancel", job.job_id], check=True, timeout=60)
    assert wait(job.job_id, {"CANCELLED", "COMPLETED", "FAILED"}) == "CANCELLED"
    return job


def test_scancel_of_a_python_function_gives_uncompleted_job_error(slurm_cluster, slurm_wait, tmp_path):
    marker = tmp_path / "started"
    job = _submit_and_scancel(
        slurm_cluster.partition, tmp_path / "submitit", slurm_wait, marker, python_sleep_after_marker, str(marker)
    )
    # submitit ignores SIGTERM in the job; SIGKILL follows after KillWait, so no result pickle exists.
    job._results_timeout_s = 1  # submitit waits 15 s for a late pickle (NFS grace); one node needs none
    with pytest.raises(submitit.core.utils.UncompletedJobError) as err:
        job.result()
    assert not isinstance(err.value, submitit.core.utils.FailedJobError)
    assert "CANCELLED" in str(err.value)


def test_scancel_of_a_subprocess_looks_like_a_crash_to_submitit(slurm_cluster, slurm_wait, tmp_path):
    # Slurm's SIGTERM reaches the child process too (proctrack signals every process of the step), the
    # child dies and the Python function raises *before* SIGKILL: submitit pickles that as a failure.
    # So FailedJobError alone does not mean "the workload crashed": check sacct for CANCELLED first.
    marker = tmp_path / "started"
    cmd = ["bash", "-c", f"touch {marker}; exec sleep 300"]
    job = _submit_and_scancel(slurm_cluster.partition, tmp_path / "submitit", slurm_wait, marker, subprocess.check_call, cmd)
    with pytest.raises(submitit.core.utils.FailedJobError, match="SIGTERM"):
        job.result()


@pytest.mark.slow
def test_time_limit_shows_timeout(slurm_cluster, slurm_wait, tmp_path):
    # Slurm limits are whole minutes and slurmctld checks them every 30 s: this takes 60-90 s.
    job_id = sbatch("--time=1", "--wrap", "sleep 600", cwd=tmp_path)
    assert slurm_wait(job_id, {"TIMEOUT", "COMPLETED", "FAILED", "CANCELLED"}, deadline_s=240) == "TIMEOUT"
