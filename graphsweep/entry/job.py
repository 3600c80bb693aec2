"""The job side of a run: what executes inside the allocation (submitit calls `job_main` there).

`job_main` starts the training command as a subprocess, its output going to the job's log, and returns the facts
run.json records (exit code, wall time, the job's provenance). `job_argv` is that command: the plan's argv, as its
own srun step into the user's container when the plan says so, or the ABBA driver for a pair job.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from graphsweep import provenance, resources
from graphsweep.layout import TORCHRUN_TEE
from graphsweep.records import LaunchPlan
from graphsweep.vocab import ABBA_DRIVER, PYTHON


def is_pair_plan(plan: LaunchPlan) -> bool:
    return len(plan.argv) >= 3 and plan.argv[1] == "-m" and plan.argv[2] == ABBA_DRIVER


def tees_rank_files(plan: LaunchPlan) -> bool:
    """A torchrun of this node (`python -m torch.distributed.run ... --tee=3`) that names no --log-dir: the job gives
    it one (layout.TORCHRUN_LOG_DIR_ENV), so its per-rank files land with the run instead of in /tmp."""
    if plan.srun or plan.argv[1:3] != ["-m", "torch.distributed.run"]:
        return False
    launcher = []
    for arg in plan.argv[3:]:
        if not arg.startswith("-"):
            break  # the training script: what follows is its own
        launcher.append(arg)
    return TORCHRUN_TEE in launcher and not any(a.startswith(("--log-dir", "--log_dir")) for a in launcher)


def own_interpreter(argv: list[str]) -> list[str]:
    """graphsweep's own programs (`python -m graphsweep...`, the plan's vocab.PYTHON) run in this process's interpreter:
    the job's, which has graphsweep. Called inside the job, so a profile's slurm.python applies; any other command,
    and an interpreter the spec names, runs as planned."""
    if len(argv) >= 3 and argv[0] == PYTHON and argv[1] == "-m" and argv[2].split(".")[0] == "graphsweep":
        return [sys.executable, *argv[1:]]
    return list(argv)


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def job_main(argv: list[str], env: Mapping[str, str], log_path: str, cwd: str | None = None) -> dict[str, Any]:
    """Run the training command inside the job; its stdout and stderr go to log_path. Returns facts for run.json."""
    start, t0 = utc_now(), time.monotonic()
    argv = own_interpreter(argv)
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
        "slurm_restart_count": int(os.environ.get("SLURM_RESTART_COUNT") or 0),
    }


def _provenance(env: Mapping[str, str]) -> dict[str, Any]:
    """What produced this run, collected inside the job (graphsweep/provenance.py); never fails the job."""
    try:
        # the training process prints its own CUDA stack (provenance.log_line); no torch import here
        return provenance.collect(env, probe_torch=False)
    except Exception as exc:  # noqa: BLE001 - provenance is evidence, not a reason to lose the run
        return {"error": f"{type(exc).__name__}: {exc}"}


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _as_list(value: Any) -> list[str]:
    if _empty(value):
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return [str(v) for v in value]


def job_argv(plan: LaunchPlan, slurm: Mapping[str, Any]) -> list[str]:
    """The command job_main starts: the training, as its own srun step when the plan says so.

    A profile's container settings apply to such a step when the spec did not already set them.
    """
    if is_pair_plan(plan):  # the ABBA driver runs in the batch step and wraps each segment itself (entry/abba.py)
        return [*plan.argv, "--slurm", json.dumps(dict(slurm or {}), sort_keys=True, default=str)]
    if not plan.srun:
        return list(plan.argv)
    args = list(plan.srun_args)
    image = slurm.get("container_image")
    if image and not any(a.startswith("--container-image") for a in args):
        repo = str(slurm.get("graphsweep_dir") or resources.SOURCE_ROOT)
        mounts = [f"{repo}:{repo}", *_as_list(slurm.get("container_mounts"))]
        args += [f"--container-image={image}", f"--container-mounts={','.join(mounts)}", "--no-container-mount-home"]
        if slurm.get("container_workdir"):
            args.append(f"--container-workdir={slurm['container_workdir']}")
    for flag in _as_list(slurm.get("srun_args")):
        if flag not in args:
            args.append(flag)
    return ["srun", *args, *plan.argv]
