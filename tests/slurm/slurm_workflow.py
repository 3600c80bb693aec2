"""Helpers for running the real workflow through `snakemake --profile slurm` on the local cluster.

A scratch working directory gets the repository's configs, a copy of profiles/slurm with a cluster.yaml for this
GPU-less 2-CPU cluster, and the same `slurm -> profiles/slurm` symlink as the repository root, so the command the
tests type is the users' command. `sbatch` and `sacct` are wrapped by counting scripts first on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support import ROOT

HOST = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()

# Small sweeps for the fault tests: the builtin GPT on CPU; graph arms end quickly as blocked (no CUDA).
SMALL_SPEC = {
    "sweep": "small",
    "description": "fault tests: one shape, eager + one graph variant",
    "workload": {"kind": "builtin"},
    "axes": {"hidden": [64], "micro_batch": [1]},
    "fixed": {"layers": 1, "heads": 2, "seq_length": 32, "vocab": 128},
    "variants": [{"impl": "full_iteration"}],
    "repeats": 1,
    "warmup": 3,
    "iterations": 10,
    "executor": {"cluster": "local", "timeout_min": 5},
}

WRAPPER = """#!/bin/sh
# Counting wrapper (graphsweep Slurm tests): one line per call, then the real command.
start=$(date +%s.%N)
out=$({real} "$@")
rc=$?
printf '%s\\t%s\\t%s\\t%s\\n' "$start" "$rc" "$(echo "$out" | head -c 200 | tr '\\n\\t' '  ')" "$*" >> {log}
[ -n "$out" ] && printf '%s\\n' "$out"
exit $rc
"""


def counting_wrappers(bin_dir: Path, names: tuple[str, ...] = ("sbatch", "sacct")) -> dict[str, Path]:
    """Scripts named like the Slurm commands that log every call to bin_dir/NAME.calls; put bin_dir first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    logs = {}
    for name in names:
        real = shutil.which(name)
        assert real, f"{name} is not installed"
        log = bin_dir / f"{name}.calls"
        log.touch()
        (bin_dir / name).write_text(WRAPPER.format(real=real, log=log))
        (bin_dir / name).chmod(0o755)
        logs[name] = log
    return logs


@dataclass
class Call:
    t: float
    rc: int
    out: str
    args: str


def calls(log: Path) -> list[Call]:
    out = []
    for line in log.read_text().splitlines():
        t, rc, stdout, args = (line.split("\t") + ["", "", ""])[:4]
        out.append(Call(float(t), int(rc), stdout, args))
    return out


@dataclass
class Workdir:
    path: Path
    bin: Path
    logs: dict[str, Path]
    spec: str | None = None
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.bin}:{Path(sys.executable).parent}:{os.environ['PATH']}"}

    def command(self, *args: str) -> list[str]:
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--profile", "slurm"]
        if self.spec:
            cmd += ["--config", f"spec={self.spec}"]
        return cmd + list(args)

    def snakemake(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args), cwd=self.path, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip

    def start(self, *args: str) -> subprocess.Popen:
        """The controller in the background, in its own process group (as a terminal would run it)."""
        out = open(self.path / f"controller-{len(self.procs)}.txt", "w")
        proc = subprocess.Popen(self.command(*args), cwd=self.path, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, text=True)  # fmt: skip
        proc.output_path = out.name  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def unlock(self) -> None:
        res = self.snakemake("--unlock")
        assert res.returncode == 0, res.stderr[-2000:]

    def submitted(self) -> list[Call]:
        """Successful sbatch calls so far."""
        return [c for c in calls(self.logs["sbatch"]) if c.rc == 0]

    def sweep_dir(self) -> Path:
        name = yaml.safe_load((self.path / (self.spec or "configs/sweep.yaml")).read_text())["sweep"]
        return self.path / "results" / name

    def side_files(self) -> dict[str, dict[str, Any]]:
        out = {}
        for side in (self.sweep_dir() / ".jobs").glob("*/job.json"):
            try:
                out[side.parent.name] = json.loads(side.read_text())
            except ValueError:
                pass  # being written
        return out

    def run_jsons(self) -> dict[str, tuple[int, str]]:
        """run_id -> (mtime_ns, content) of every written run.json: a completed result must never change."""
        return {p.parent.name: (p.stat().st_mtime_ns, p.read_text()) for p in (self.sweep_dir() / "runs").glob("*/run.json")}

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)


def make_workdir(tmp: Path, spec: dict[str, Any] | None = None, **slurm: Any) -> Workdir:
    """A scratch checkout: configs, profiles/slurm (this cluster's cluster.yaml), ./slurm symlink, counting wrappers."""
    shutil.copytree(ROOT / "configs", tmp / "configs")
    profile = tmp / "profiles" / "slurm"
    profile.mkdir(parents=True)
    shutil.copy(ROOT / "profiles" / "slurm" / "config.yaml", profile / "config.yaml")
    cluster = yaml.safe_load((ROOT / "profiles" / "slurm" / "cluster.yaml").read_text())
    cluster["slurm"].update(
        partition="debug",
        request_gpus=False,  # the test cluster has no GPUs; the builtin workload runs on CPU
        exclusive=False,  # let the 2 CPUs run two jobs at once
        status_interval_s=2,
        progress_interval_s=10,
        result_grace_s=3,
    )
    cluster["slurm"].update(slurm)
    (profile / "cluster.yaml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    os.symlink("profiles/slurm", tmp / "slurm")
    spec_name = None
    if spec is not None:
        spec_name = "spec.yaml"
        (tmp / spec_name).write_text(yaml.safe_dump(spec, sort_keys=False))
    logs = counting_wrappers(tmp / "bin")
    return Workdir(path=tmp, bin=tmp / "bin", logs=logs, spec=spec_name)


def sacct_jobs(job_ids: list[str]) -> dict[str, dict[str, str]]:
    """JobID -> {State, Timelimit, JobName, Elapsed} from one sacct call (allocations only)."""
    if not job_ids:
        return {}
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,State,Timelimit,JobName,Elapsed"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    rows = {}
    for line in out.splitlines():
        jid, state, limit, name, elapsed = line.split("|")
        rows[jid] = {"State": state.split()[0], "Timelimit": limit, "JobName": name, "Elapsed": elapsed}
    return rows


def wait_until(predicate, deadline_s: float, what: str, proc: subprocess.Popen | None = None, poll_s: float = 0.5):
    """Poll predicate() until it returns something truthy; fail with `what` (and the controller's output)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(poll_s)
    output = Path(proc.output_path).read_text()[-4000:] if proc is not None else ""  # type: ignore[attr-defined]
    raise AssertionError(f"timed out after {deadline_s:.0f} s waiting for {what}\n{output}")


def controller_output(proc: subprocess.Popen) -> str:
    return Path(proc.output_path).read_text()  # type: ignore[attr-defined]
