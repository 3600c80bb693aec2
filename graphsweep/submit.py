"""Submit one run through submitit, wait for it, and write its run.json.

The controller side (`submit_and_wait`) runs in the Snakemake rule on the login node; the job side (`job_main`)
runs inside the allocation and starts the training command as a subprocess, its output going to the run's log.

Reattach: the job id is written to a side file (`results/{sweep}/.jobs/{run_id}/job.json`) that is NOT a declared
output, so a controller that was killed and started again finds its in-flight Slurm job instead of submitting
a duplicate. Deterministic outcomes (the training exited non-zero: OOM, config rejected, crash) are results;
infrastructure failures (the job died without a result: cancelled, node failure, preempted, walltime) raise
InfraFailure so the rule fails and Snakemake's --retries reruns only that run.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import submitit

from graphsweep.launch import LaunchPlan

# sacct states in which a job is still alive (it may finish): reattach and wait.
ALIVE_STATES = {"PENDING", "RUNNING", "REQUEUED", "COMPLETING", "CONFIGURING", "RESIZING", "SUSPENDED", "READY"}
# States a job can hang in forever without finishing (submitit waits forever on these): wall-clock guarded.
STUCK_STATES = {"PREEMPTED", "UNKNOWN"}


class InfraFailure(RuntimeError):
    """The job did not produce a result for infrastructure reasons; the run must be retried, not recorded."""

    def __init__(self, state: str, message: str):
        self.state = state
        super().__init__(f"{state}: {message}")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------------------------------
# Job side


def job_main(argv: list[str], env: Mapping[str, str], log_path: str, cwd: str | None = None) -> dict[str, Any]:
    """Run the training command inside the job; its stdout and stderr go to log_path. Returns facts for run.json."""
    start, t0 = utc_now(), time.monotonic()
    full_env = {**os.environ, **{k: str(v) for k, v in env.items()}}
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.run(argv, env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, check=False)
            exit_code = proc.returncode
        except OSError as exc:  # command not found: a result (launch error), not an infrastructure failure
            log.write(f"[graphsweep] launch error: {exc}\n".encode())
            exit_code = 127
    return {
        "provenance": _provenance(full_env),
        "host": socket.gethostname(),
        "start_utc": start,
        "end_utc": utc_now(),
        "wall_s": round(time.monotonic() - t0, 3),
        "exit_code": exit_code,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_nodelist": os.environ.get("SLURM_JOB_NODELIST"),
    }


def _provenance(env: Mapping[str, str]) -> dict[str, Any]:
    """What produced this run, collected inside the job (graphsweep/provenance.py); never fails the job."""
    try:
        from graphsweep import provenance

        return provenance.collect(env)
    except Exception as exc:  # noqa: BLE001 - provenance is evidence, not a reason to lose the run
        return {"error": f"{type(exc).__name__}: {exc}"}


# --------------------------------------------------------------------------------------------------
# Controller side


@dataclass
class SubmitSettings:
    cluster: str = "local"  # local | slurm | debug
    timeout_min: int = 10
    gpus_per_node: int = 0  # 0: the run's own GPU count on one node
    slurm: Mapping[str, Any] = field(default_factory=dict)  # slurm_partition, slurm_account, ... (submitit names)
    poll_s: float = 2.0
    stuck_guard_s: float = 1800.0  # how long a job may sit in PREEMPTED/UNKNOWN before we give up on it


def _executor(folder: Path, plan: LaunchPlan, s: SubmitSettings, name: str) -> submitit.AutoExecutor:
    ex = submitit.AutoExecutor(folder=str(folder / "%j"), cluster=s.cluster)
    params: dict[str, Any] = {"timeout_min": int(s.timeout_min), "name": name}
    if s.cluster == "local":
        # submitit's local executor hides all GPUs unless gpus_per_node is set.
        params["gpus_per_node"] = max(1, plan.gpus_per_node)
    elif s.cluster == "slurm":
        params.update(
            nodes=plan.nodes,
            gpus_per_node=plan.gpus_per_node,
            tasks_per_node=1,  # the submitit task starts the training (an srun step for multi-task runs)
        )
        params.update({k: v for k, v in s.slurm.items() if v not in (None, "", [], {})})
    ex.update_parameters(**params)
    return ex


def _side_file(jobs_dir: Path) -> Path:
    return jobs_dir / "job.json"


def _read_side(jobs_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads(_side_file(jobs_dir).read_text())
    except (OSError, ValueError):
        return None


def _write_side(jobs_dir: Path, record: dict[str, Any]) -> None:
    jobs_dir.mkdir(parents=True, exist_ok=True)
    tmp = _side_file(jobs_dir).with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(_side_file(jobs_dir))


def _reattach(side: dict[str, Any], say: Callable[[str], None]) -> submitit.Job | None:
    """A Slurm job from a previous controller that is alive or finished with a result; None otherwise."""
    if side.get("cluster") != "slurm":
        return None  # a local job's id is a PID of a dead controller: nothing to reattach to
    job = submitit.SlurmJob(folder=side["folder"], job_id=str(side["job_id"]))
    result_pickle = Path(side["folder"].replace("%j", str(side["job_id"]))) / f"{side['job_id']}_0_result.pkl"
    state = job.watcher.get_state(str(side["job_id"]), mode="force")
    if result_pickle.exists() or state in ALIVE_STATES | {"COMPLETED"}:
        say(f"reattaching to Slurm job {side['job_id']} (state {state}) instead of submitting a new one")
        return job
    say(f"previous Slurm job {side['job_id']} ended {state} without a result; submitting a new one")
    return None


def _wait(job: submitit.Job, s: SubmitSettings, say: Callable[[str], None], progress: Callable[[], str]) -> None:
    stuck_since: float | None = None
    last_note = 0.0
    while not job.done():
        state = job.state if s.cluster == "slurm" else "RUNNING"
        if state in STUCK_STATES:
            stuck_since = stuck_since or time.monotonic()
            if time.monotonic() - stuck_since > s.stuck_guard_s:
                raise InfraFailure(state, f"job {job.job_id} stuck in {state} for over {s.stuck_guard_s:.0f} s")
        else:
            stuck_since = None
        if time.monotonic() - last_note > 60:
            say(f"job {job.job_id}: {state} {progress()}".rstrip())
            last_note = time.monotonic()
        time.sleep(s.poll_s)


def _collect(job: submitit.Job, s: SubmitSettings) -> tuple[dict[str, Any], str | None]:
    """The job's facts and its final scheduler state; raise InfraFailure when it produced no result."""
    try:
        facts = job.result()
    except submitit.core.utils.FailedJobError as exc:  # subclass of UncompletedJobError: catch first
        text = str(exc)
        if "timed-out" in text:
            raise InfraFailure("TIMEOUT", "the job hit its time limit (submitit: timed-out and not checkpointable)")
        raise InfraFailure("FAILED", f"the job's wrapper raised: {text.strip().splitlines()[-1][:300]}")
    except submitit.core.utils.UncompletedJobError as exc:
        state = "UNKNOWN"
        if s.cluster == "slurm":
            state = job.watcher.get_state(job.job_id, mode="force")
        raise InfraFailure(state, f"job {job.job_id} produced no result: {str(exc).strip()[:300]}")
    state = "COMPLETED"
    if s.cluster == "slurm":
        state = job.watcher.get_state(job.job_id, mode="force")
    return facts, state


def submit_and_wait(
    run_id: str,
    plan: LaunchPlan,
    log_path: Path,
    jobs_dir: Path,
    settings: SubmitSettings,
    attempt: int = 1,
    say: Callable[[str], None] = print,
    progress: Callable[[], str] = lambda: "",
) -> dict[str, Any]:
    """Submit (or reattach to) the job of one run, wait for it, and return its run.json record."""
    side = _read_side(jobs_dir)
    job = _reattach(side, say) if side else None
    if job is None:
        if log_path.exists():
            log_path.unlink()  # a new job starts a new log; earlier attempts live under jobs_dir
        ex = _executor(jobs_dir / "submitit", plan, settings, name=f"gs-{run_id}"[:64])
        job = ex.submit(job_main, list(plan.argv), dict(plan.env), str(log_path.resolve()))
        side = {
            "cluster": settings.cluster,
            "job_id": str(job.job_id),
            "folder": str((jobs_dir / "submitit" / "%j").resolve()),
            "attempt": attempt,
            "submitted_utc": utc_now(),
        }
        _write_side(jobs_dir, side)
        say(f"submitted {run_id} as {settings.cluster} job {job.job_id}")
    _wait(job, settings, say, progress)
    try:
        facts, state = _collect(job, settings)
    except InfraFailure:
        # keep this attempt's evidence, forget the job so the retry submits a fresh one
        if log_path.exists():
            shutil.copy(log_path, jobs_dir / f"log.{side['job_id']}.txt")
        _side_file(jobs_dir).unlink(missing_ok=True)
        raise
    record = {
        "run_id": run_id,
        "executor": settings.cluster,
        "job_id": str(job.job_id),
        "attempt": attempt,
        "state": state,
        "command": plan.shell(),
        "gpus": plan.gpus,
        "nodes": plan.nodes,
        "submitted_utc": side.get("submitted_utc"),
        **facts,
    }
    record["gpu_seconds"] = round(plan.gpus * float(record.get("wall_s") or 0.0), 3)
    return record


def settings_from_spec(executor: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> SubmitSettings:
    merged = {**executor, **(overrides or {})}
    known = {f for f in SubmitSettings.__dataclass_fields__}
    return SubmitSettings(**{k: v for k, v in merged.items() if k in known})


def write_json(path: Path, record: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=str) + "\n")
    tmp.replace(path)


if __name__ == "__main__":  # pragma: no cover - debugging aid
    print(json.dumps(asdict(SubmitSettings()), indent=1), file=sys.stderr)


def plan_from_config(cfg: Mapping[str, Any]) -> LaunchPlan:
    la = cfg["launch"]
    return LaunchPlan(
        argv=list(la["argv"]),
        env=dict(la.get("env", {})),
        gpus=int(la.get("gpus", 1)),
        nodes=int(la.get("nodes", 1)),
        gpus_per_node=int(la.get("gpus_per_node", 1)),
        tasks_per_node=int(la.get("tasks_per_node", 1)),
        overrides=dict(la.get("overrides", {})),
        srun=bool(la.get("srun", False)),
        srun_args=list(la.get("srun_args", [])),
    )


def execute_run(
    config_path: Path,
    run_json: Path,
    log_path: Path,
    jobs_dir: Path,
    attempt: int = 1,
    timeout_min: int | None = None,
    cluster: str | None = None,
    slurm: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The run rule: submit (or reattach), wait, retry once on a known-transient signature, write run.json."""
    import yaml

    from graphsweep.parse import find_transient

    cfg = yaml.safe_load(Path(config_path).read_text())
    plan = plan_from_config(cfg)
    overrides: dict[str, Any] = {}
    if timeout_min:
        overrides["timeout_min"] = int(timeout_min)
    if cluster:
        overrides["cluster"] = cluster
    if slurm:
        overrides["slurm"] = {**cfg["executor"].get("slurm", {}), **slurm}
    settings = settings_from_spec(cfg["executor"], overrides)
    run_id = cfg["run"]["run_id"]
    record = submit_and_wait(run_id, plan, log_path, jobs_dir, settings, attempt, say)
    transient = find_transient(log_path) if record["exit_code"] != 0 else None
    if transient:
        # One automatic retry for signatures known to be transient (Bridge's is_flaky_failure list, reference 6.2).
        kept = jobs_dir / f"log.transient.{record['job_id']}.txt"
        shutil.copy(log_path, kept)
        say(f"{run_id}: transient failure ({transient}); retrying once")
        _side_file(jobs_dir).unlink(missing_ok=True)
        first = {**record, "log": str(kept), "signature": transient}
        record = submit_and_wait(run_id, plan, log_path, jobs_dir, settings, attempt, say)
        record["previous_attempts"] = [first]
    write_json(run_json, record)
    _side_file(jobs_dir).unlink(missing_ok=True)  # finished: nothing to reattach to any more
    return record
