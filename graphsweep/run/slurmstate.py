"""Slurm job states for every waiting run from ONE shared, rate-limited `sacct` call.

A controller on the graphsweep executor waits for all its runs in one loop (run/watch.py Fleet, run/executor.py);
the run rule's script waits for its one run in its own process (run/watch.py SlurmWaiter). Either way no waiter
asks the scheduler on its own (submitit's per-process watcher: `job.done()`, `job.state`): every waiter registers
its job ids in a small JSON cache guarded by a file lock; whichever finds the cache older than `min_interval_s`
refreshes it for all registered jobs with a single `sacct -j id1,id2,...` while holding the lock, so the whole user
account makes at most 60 / min_interval_s calls a minute, however many waiters and sweeps there are. A waiter
detects completion from the result pickle first and looks at the cache only to notice jobs that ended without a
result (cancelled, timeout, node failure) or hang (PREEMPTED, UNKNOWN).

The cache also carries what the controller prints while it waits: one progress line per interval for all of a
controller's in-flight jobs (queue state, or the latest `iteration i/N` read from the training log's tail), and
the Ctrl-C summary of the jobs left running.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from graphsweep.fileio import write_json
from graphsweep.parse.progress import latest_iteration

# sacct states in which a job may still finish: keep waiting.
ALIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "COMPLETING", "CONFIGURING", "RESIZING",
     "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED", "READY", "RESV_DEL_HOLD"}
)  # fmt: skip
# States a job can sit in forever without finishing (submitit's own wait loops forever on them): wall-clock guarded.
STUCK_STATES = frozenset({"PREEMPTED", "UNKNOWN"})
SACCT_FIELDS = ("JobID", "State", "ExitCode", "Elapsed", "Timelimit", "NodeList", "Reason")

DEFAULT_MIN_INTERVAL_S = 10.0  # at most 6 sacct calls a minute for all waiters together
DEFAULT_LEASE_S = 180.0  # a job nobody asked about for this long is dropped from the query


def default_state_dir() -> Path:
    """Per user, so concurrent sweeps of one user share the rate limit: $GRAPHSWEEP_SLURM_STATE or the XDG cache."""
    env = os.environ.get("GRAPHSWEEP_SLURM_STATE")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "graphsweep" / "slurm"


@dataclass(frozen=True)
class JobRecord:
    """One job's line from sacct (allocation only, `-X`)."""

    job_id: str
    state: str  # first word: "CANCELLED by 0" -> "CANCELLED"
    exit_code: str = ""
    elapsed: str = ""
    timelimit: str = ""
    nodes: str = ""
    reason: str = ""


def parse_sacct(text: str) -> dict[str, JobRecord]:
    """`sacct -X -n -P -o JobID,State,ExitCode,Elapsed,Timelimit,NodeList,Reason` output -> records by job id.

    A requeued job has one line per run when asked with -D; without it sacct prints the latest, and if several lines
    still come back the last one wins.
    """
    records: dict[str, JobRecord] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        parts += [""] * (len(SACCT_FIELDS) - len(parts))
        job_id, state = parts[0], (parts[1].split() or [""])[0]
        records[job_id] = JobRecord(job_id, state, *parts[2 : len(SACCT_FIELDS)])
    return records


def sacct(job_ids: Iterable[str], timeout_s: float = 60.0) -> dict[str, JobRecord]:
    """One batched sacct call for all job_ids. Raises OSError / CalledProcessError / TimeoutExpired on failure."""
    ids = sorted({str(j) for j in job_ids}, key=lambda j: (len(j), j))
    if not ids:
        return {}
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", ",".join(SACCT_FIELDS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    ).stdout
    return parse_sacct(out)


@dataclass(frozen=True)
class Lookup:
    """What the shared cache knows about one job after a lookup."""

    record: JobRecord | None
    queried_at: float  # wall time of the last sacct call (0: never)
    ok: bool  # the last sacct call succeeded
    error: str = ""


@dataclass
class Waiting:
    """A registered job: who waits for it and where its training log is (for progress lines)."""

    label: str
    log: str = ""
    controller: int = 0
    seen: float = 0.0
    registered: float = 0.0


@dataclass
class SlurmStateCache:
    """The shared sacct cache in state_dir (sacct.json + sacct.lock). Safe across processes on one host (flock)."""

    state_dir: Path = field(default_factory=default_state_dir)
    min_interval_s: float = DEFAULT_MIN_INTERVAL_S
    lease_s: float = DEFAULT_LEASE_S
    sacct_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir)

    @property
    def path(self) -> Path:
        return self.state_dir / "sacct.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "sacct.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = self._load()
                before = json.dumps(data, sort_keys=True)
                yield data
                if json.dumps(data, sort_keys=True) != before:
                    write_json(self.path, data, indent=None)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            data = {}
        data.setdefault("version", 1)
        for key in ("jobs", "waiting", "progress_at", "interrupted_at"):
            data.setdefault(key, {})
        data.setdefault("queried_at", 0.0)
        data.setdefault("ok", False)
        data.setdefault("error", "")
        data.setdefault("calls", 0)
        return data

    def register(self, job_id: str, label: str, log: str | Path | None = None, controller: int | None = None) -> None:
        now = time.time()
        with self._locked() as data:
            old = data["waiting"].get(str(job_id), {})
            data["waiting"][str(job_id)] = asdict(
                Waiting(label=label, log=str(log or ""), controller=int(controller or os.getppid()), seen=now,
                        registered=old.get("registered", now))
            )  # fmt: skip

    def forget(self, job_id: str) -> None:
        with self._locked() as data:
            data["waiting"].pop(str(job_id), None)
            data["jobs"].pop(str(job_id), None)

    def lookup(self, job_id: str, refresh: bool = True) -> Lookup:
        """The job's latest known record; refreshes the cache for every waiting job when it is older than allowed."""
        job_id = str(job_id)
        now = time.time()
        with self._locked() as data:
            entry = data["waiting"].get(job_id)
            if entry is not None:
                entry["seen"] = now
            if refresh and now - float(data["queried_at"]) >= self.min_interval_s:
                self._refresh(data, now)
            rec = data["jobs"].get(job_id)
            return Lookup(
                record=JobRecord(**rec) if rec else None,
                queried_at=float(data["queried_at"]),
                ok=bool(data["ok"]),
                error=str(data["error"]),
            )

    def lookup_many(self, jobs: Mapping[str, tuple[str, str]], controller: int) -> dict[str, Lookup]:
        """lookup() for many jobs at once (one lock, at most one sacct call): `jobs` maps each job id to its label and
        training log; each is registered as waited for by `controller` (one process waiting for all of them)."""
        now = time.time()
        with self._locked() as data:
            for job_id, (label, log) in jobs.items():
                old = data["waiting"].get(str(job_id), {})
                data["waiting"][str(job_id)] = asdict(Waiting(label=label, log=str(log or ""), controller=controller,
                                                              seen=now, registered=old.get("registered", now)))
            if now - float(data["queried_at"]) >= self.min_interval_s:
                self._refresh(data, now)
            records = {j: data["jobs"].get(str(j)) for j in jobs}
            return {j: Lookup(record=JobRecord(**rec) if rec else None, queried_at=float(data["queried_at"]),
                              ok=bool(data["ok"]), error=str(data["error"])) for j, rec in records.items()}

    def forget_many(self, job_ids: Iterable[str]) -> None:
        with self._locked() as data:
            for job_id in job_ids:
                data["waiting"].pop(str(job_id), None)
                data["jobs"].pop(str(job_id), None)

    def _refresh(self, data: dict[str, Any], now: float) -> None:
        waiting = data["waiting"]
        for job_id in [j for j, w in waiting.items() if now - float(w.get("seen", 0)) > self.lease_s]:
            waiting.pop(job_id)  # its waiter is gone (killed controller): stop asking about it
        for key in ("progress_at", "interrupted_at"):  # one entry per controller ever run: keep a day
            data[key] = {c: at for c, at in data[key].items() if now - float(at) < 86400}
        data["queried_at"] = now  # also on failure: a broken sacct is not hammered by every waiter
        data["calls"] = int(data["calls"]) + 1
        try:
            found = sacct(waiting.keys(), timeout_s=self.sacct_timeout_s) if waiting else {}
        except (OSError, subprocess.SubprocessError) as exc:
            stderr = getattr(exc, "stderr", "") or ""
            data["ok"], data["error"] = False, f"{type(exc).__name__}: {exc} {stderr}".strip()[:500]
            return
        data["ok"], data["error"] = True, ""
        data["jobs"] = {j: asdict(found[j]) for j in waiting if j in found}

    def progress_due(self, controller: int, interval_s: float) -> list[tuple[str, Waiting, JobRecord | None]] | None:
        """Every waiting job of this controller with its state, once per interval_s (to the caller that gets it)."""
        return self._once_per(controller, "progress_at", interval_s)

    def interrupted(self, controller: int, window_s: float = 120.0) -> list[tuple[str, Waiting, JobRecord | None]] | None:
        """The jobs of an interrupted controller, to the first of its waiters that asks (None to the others)."""
        return self._once_per(controller, "interrupted_at", window_s)

    def _once_per(self, controller: int, stamp: str, window_s: float) -> list[tuple[str, Waiting, JobRecord | None]] | None:
        """This controller's jobs to the first waiter that asks in each window (stamp: the shared file's time field)."""
        now = time.time()
        key = str(controller)
        with self._locked() as data:
            if now - float(data[stamp].get(key, 0.0)) < window_s:
                return None
            data[stamp][key] = now
            return self._of_controller(data, controller)

    @staticmethod
    def _of_controller(data: dict[str, Any], controller: int) -> list[tuple[str, Waiting, JobRecord | None]]:
        out = []
        for job_id, w in sorted(data["waiting"].items(), key=lambda kv: kv[1].get("label", "")):
            if int(w.get("controller", 0)) == controller:
                rec = data["jobs"].get(job_id)
                out.append((job_id, Waiting(**w), JobRecord(**rec) if rec else None))
        return out

    def calls(self) -> int:
        """How many sacct calls this cache has made (for benchmarks and tests)."""
        with self._locked() as data:
            return int(data["calls"])


def progress_line(jobs: list[tuple[str, Waiting, JobRecord | None]], max_detail: int = 4) -> str:
    """One line for a controller's in-flight jobs: counts by state, then the running ones with their iteration."""
    by_state: dict[str, int] = {}
    details: list[str] = []
    for job_id, w, rec in jobs:
        state = rec.state if rec else "SUBMITTED"
        by_state[state] = by_state.get(state, 0) + 1
        if state == "RUNNING":
            it = latest_iteration(w.log)
            where = f"iteration {it[0]}/{it[1]}" if it else f"running {rec.elapsed if rec else ''}".strip()
            details.append(f"{w.label} (job {job_id}) {where}")
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(by_state.items(), key=lambda kv: (-kv[1], kv[0])))
    more = f" +{len(details) - max_detail} more" if len(details) > max_detail else ""
    stamp = time.strftime("%H:%M:%S")
    return f"{stamp} Slurm: {len(jobs)} in flight ({counts})" + (
        " | " + "; ".join(details[:max_detail]) + more if details else ""
    )


def interrupt_message(jobs: list[tuple[str, Waiting, JobRecord | None]]) -> str:
    """What a cancelled controller tells the user about the jobs it left behind."""
    if not jobs:
        return "interrupted; no Slurm job was in flight."
    jobs = sorted(jobs, key=lambda j: (len(j[0]), j[0]))
    ids = [job_id for job_id, _, _ in jobs]
    lines = [f"interrupted; {len(jobs)} Slurm job(s) left running (they keep their allocation):"]
    for job_id, w, rec in jobs:
        lines.append(f"  {job_id}  {rec.state if rec else 'SUBMITTED':<10} {w.label}")
    lines.append(f"  cancel them:  scancel {' '.join(ids)}")
    lines.append(
        "  or reattach:  run the same snakemake command again (after `snakemake --unlock` if it says the directory "
        "is locked); finished and running jobs are picked up, nothing is submitted twice"
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# What waiting needs (graphsweep/run/watch.py waits: one process per run, or one loop for all)


class InfraFailure(RuntimeError):
    """The job did not produce a result for infrastructure reasons; the run must be retried, not recorded.
    `cancel`: the job may still hold its allocation (stuck): cancel it before the retry."""

    def __init__(self, state: str, message: str, cancel: bool = False):
        self.state, self.cancel = state, cancel
        super().__init__(f"{state}: {message}")


class ControllerGone(SystemExit):
    """The Snakemake controller died (kill -9, closed terminal): leave the Slurm job for a later reattach."""


@dataclass(frozen=True)
class WaitLimits:
    poll_s: float = 2.0  # result pickle check (a file stat, no scheduler call)
    status_interval_s: float = DEFAULT_MIN_INTERVAL_S  # how often this waiter reads the shared cache
    progress_interval_s: float = 120.0
    stuck_limit_s: float = 1800.0
    lost_after_s: float = 600.0
    result_grace_s: float = 30.0


def result_pickle(side: Mapping[str, Any]) -> Path:
    """submitit's result file of task 0 of the job in a side file (folder with %j, job_id)."""
    job_id = str(side["job_id"])
    return Path(str(side["folder"]).replace("%j", job_id)) / f"{job_id}_0_result.pkl"
