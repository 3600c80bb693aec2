#!/usr/bin/env python3
"""`make test`: every test, in the three lanes of tests/conftest.py, side by side where they can be.

    python tests/lane/lanes.py [--workers N] [--dir CHECKOUT] [PYTEST_ARG ...]

1. `slurm` and `cpu` at once. The slurm lane is one pytest process: its tests mostly wait on the local Slurm cluster
   (sacct polls, jobs that sleep, 1-minute time limits), so it runs beside the cpu lane, whose tests keep the cores
   busy (Snakemake, torch, Chromium and the unit tests) on N pytest-xdist workers (default: one a core), a module's
   tests on one worker (--dist loadscope: a module's fixture sweep runs once).
2. `megatron` last: its live checks rewrite tests/fixtures/bridge_validator.json and core_validator.json, which the
   cpu lane's recorded-verdict tests read. Its tests each start a Python 3.12 process that imports Megatron (most of
   a minute of CPU), so they run on N workers too, a module's tests on one (they share one Bridge worker). Where $GRAPHSWEEP_MEGATRON_ENV names a file, the lane first waits for it
   and takes the variables its KEY=VALUE lines set: .ci/run builds the Bridge venv while the other lanes run and
   writes that file when the build ends.

Each lane's lines are printed as they come, prefixed with its name, then its slowest tests (--durations) and one
timed line: exit status, wall seconds and the CPU seconds of its pytest process and every process that waited for
(xdist workers, Snakemake, torch; not Slurm's jobs, which slurmd starts). The lanes' counts must add up: each lane
writes how many tests it collected and kept (conftest.py), and a test in no lane, or in two, fails the run.
Exit 0 when every lane passed; a lane that ran no test (pytest's exit 5) fails. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANES = ("cpu", "slurm", "megatron")  # tests/conftest.py LANES
COUNTS_ENV = "GRAPHSWEEP_LANE_COUNTS"  # tests/conftest.py COUNTS_ENV
ENV_FILE = "GRAPHSWEEP_MEGATRON_ENV"
DURATIONS = 25  # slowest tests a lane lists
ENV_WAIT_S = 3600.0  # a hang guard: .ci/run's build writes the file on every exit
_print_lock = threading.Lock()
_T0 = time.monotonic()


def say(text: str) -> None:
    with _print_lock:
        print(f"[lanes +{time.monotonic() - _T0:.0f}s] {text}", flush=True)


@dataclass
class Lane:
    name: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    rc: int | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    last_line: str = ""

    def run(self, root: Path, counts: Path) -> None:
        """Run the lane's pytest to its end, its lines prefixed with the lane's name; record status, wall and CPU."""
        # --lane=NAME, one word: `--lane slurm` would make pytest read `slurm` as a path first (the repository's ./slurm
        # link to profiles/slurm) and load no tests/conftest.py, which defines --lane
        argv = [sys.executable, "-m", "pytest", f"--lane={self.name}", "-ra", f"--durations={DURATIONS}", *self.args]
        say(f"{self.name}: start: {shlex.join(argv[1:])}")
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=root, env={**os.environ, **self.env, COUNTS_ENV: str(counts)},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                errors="replace", bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                self.last_line = line.strip()
            with _print_lock:
                sys.stdout.write(f"[{self.name}] {line}")
                sys.stdout.flush()
        # wait4, not Popen.wait: the CPU of pytest and of every process it (and they, in turn) waited for
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = self.rc = os.waitstatus_to_exitcode(status)
        self.wall_s, self.cpu_s = time.monotonic() - start, usage.ru_utime + usage.ru_stime
        say(f"{self.name}: {self.summary()}")

    def summary(self) -> str:
        state = "passed" if self.rc == 0 else "NO TESTS RAN" if self.rc == 5 else f"FAILED (pytest exit {self.rc})"
        return (f"{state} in {self.wall_s:.0f} s wall, {self.cpu_s:.0f} s CPU "
                f"({self.cpu_s / max(self.wall_s, 1e-9):.0%} of one core): {self.last_line.strip('= ')}")


def side_by_side(lanes: list[Lane], root: Path, counts: Path) -> None:
    threads = [threading.Thread(target=lane.run, args=(root, counts), name=lane.name) for lane in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def env_from_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (blank lines and # comments skipped), once the file exists."""
    end = time.monotonic() + ENV_WAIT_S
    if not path.exists():
        say(f"megatron: waiting for {path} (${ENV_FILE}: the Bridge venv build)")
    while not path.exists():
        if time.monotonic() > end:
            raise SystemExit(f"[lanes] {path} did not appear in {ENV_WAIT_S:.0f} s (${ENV_FILE})")
        time.sleep(2)
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            if not sep:
                raise SystemExit(f"[lanes] {path}: not KEY=VALUE: {line!r}")
            out[key.strip()] = value.strip()
    say(f"megatron: {path} sets {', '.join(f'{k}={v}' for k, v in out.items()) or 'nothing'}")
    return out


def count_problems(counts: Path, lanes: list[Lane]) -> list[str]:
    """Where the lanes' counts do not add up to one suite: each test in exactly one lane."""
    records = {}
    for lane in lanes:
        path = counts / f"{lane.name}.json"
        if not path.exists():
            return [f"{lane.name}: wrote no count ({path}): did its collection fail?"]
        records[lane.name] = json.loads(path.read_text())
    problems = []
    seen = {(r["collected"], tuple(sorted(r["per_lane"].items()))) for r in records.values()}
    if len(seen) != 1:
        problems.append(f"the lanes collected different suites: {records}")
    for name, r in records.items():
        if r["kept"] != r["per_lane"][name]:
            problems.append(f"{name}: kept {r['kept']} of the {r['per_lane'][name]} tests of its lane")
    total = next(iter(records.values()))
    if sum(r["kept"] for r in records.values()) != total["collected"]:
        problems.append(f"{sum(r['kept'] for r in records.values())} tests in the lanes, {total['collected']} collected")
    if not problems:
        say(f"{total['collected']} tests collected: " + ", ".join(f"{n} {r['kept']}" for n, r in records.items()))
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="pytest-xdist workers of the cpu lane")
    p.add_argument("--dir", type=Path, default=ROOT, help="the checkout whose tests run (default: this one)")
    args, extra = p.parse_known_args(argv)
    cpu = Lane("cpu", ["-n", str(args.workers), "--dist", "loadscope", *extra])
    slurm = Lane("slurm", extra)
    megatron = Lane("megatron", ["-n", str(args.workers), "--dist", "loadscope", *extra])
    with tempfile.TemporaryDirectory(prefix="graphsweep-lanes-") as tmp:
        counts = Path(tmp)
        side_by_side([slurm, cpu], args.dir, counts)
        if path := os.environ.get(ENV_FILE):
            megatron.env = env_from_file(Path(path))
        megatron.run(args.dir, counts)
        lanes = [cpu, slurm, megatron]
        problems = count_problems(counts, lanes)
    for lane in lanes:
        say(f"{lane.name}: {lane.summary()}")
    for problem in problems:
        say(f"ERROR: {problem}")
    failed = [lane.name for lane in lanes if lane.rc != 0]
    say(f"make test: {'FAILED: ' + ', '.join(failed) if failed or problems else 'every lane passed'} "
        f"after {time.monotonic() - _T0:.0f} s")
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
