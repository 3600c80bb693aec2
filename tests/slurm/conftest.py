"""The real local Slurm cluster for tests under tests/slurm/.

`slurm_cluster` starts it once per session with tests/slurm/local-cluster.sh. Where it cannot start
(no root, packages missing) the Slurm tests are skipped with the script's own error; under CI
(the CI environment variable set, as .ci/run does) the same failure fails them, because CI must
run them. Every name here starts with slurm_ so nothing collides with tests/conftest.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

SLURM_SCRIPT = Path(__file__).resolve().parent / "local-cluster.sh"
SLURM_START_TIMEOUT_S = 300


@dataclass(frozen=True)
class SlurmCluster:
    """What tests need to know about the running local cluster."""

    script: Path
    partition: str
    start_output: str


def slurm_in_ci() -> bool:
    """CI=true (or any value but empty/0/false) means Slurm tests may not be skipped."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def slurm_sacct_state(job_id: str) -> str:
    """The job's allocation state from sacct ("CANCELLED by 0" -> "CANCELLED").

    "" when sacct has no record yet or cannot answer (slurmdbd restarting in a fault test): callers poll.
    """
    res = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "State"], capture_output=True, text=True, timeout=60
    )
    words = res.stdout.split() if res.returncode == 0 else []
    return words[0] if words else ""


def _slurm_job_details(job_id: str) -> str:
    res = subprocess.run(["scontrol", "show", "job", str(job_id)], capture_output=True, text=True, timeout=60)
    return (res.stdout + res.stderr).strip()


def slurm_wait_state(job_id: str, states: Iterable[str], deadline_s: float = 120.0) -> str:
    """Poll sacct until the job reaches one of `states`; fail (with scontrol's view) after deadline_s.

    The deadline is a hang guard, not a performance assertion.
    """
    wanted = set(states)
    end = time.monotonic() + deadline_s
    state = ""
    while time.monotonic() < end:
        state = slurm_sacct_state(job_id)
        if state in wanted:
            return state
        time.sleep(0.5)
    pytest.fail(
        f"Slurm job {job_id} is '{state or 'not in sacct'}' after {deadline_s:.0f} s, expected one of "
        f"{sorted(wanted)}. scontrol show job:\n{_slurm_job_details(job_id)}\n"
        "Logs: /var/log/slurm-graphsweep/"
    )


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    """Start the local cluster once (idempotent); skip, or fail under CI, when it cannot start."""
    try:
        res = subprocess.run(
            ["bash", str(SLURM_SCRIPT), "start"],
            capture_output=True,
            text=True,
            timeout=SLURM_START_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        ok, output = res.returncode == 0, (res.stdout + res.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok, output = False, f"{type(exc).__name__}: {exc}"
    if not ok:
        reason = f"local Slurm cluster did not start ({SLURM_SCRIPT} start):\n{output}"
        if slurm_in_ci():
            pytest.fail(f"{reason}\nCI is set, so the Slurm tests must run: fix the cluster setup.", pytrace=False)
        pytest.skip(reason)
    return SlurmCluster(script=SLURM_SCRIPT, partition="debug", start_output=output)


@pytest.fixture()
def slurm_wait() -> Callable[..., str]:
    """slurm_wait(job_id, states, deadline_s=120) -> the state reached (see slurm_wait_state)."""
    return slurm_wait_state


@pytest.fixture()
def slurm_sacct() -> Callable[[str], str]:
    """slurm_sacct(job_id) -> the job's current sacct state, "" when unknown."""
    return slurm_sacct_state
