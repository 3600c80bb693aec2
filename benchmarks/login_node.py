"""What a sweep costs the login node: memory (RSS, PSS) and CPU of the controller's whole process tree, with runs in
flight and as they finish.

The real workflow, typed as users type it (`snakemake --profile slurm`), on the real local Slurm cluster
(tests/slurm/local-cluster.sh): a builtin sweep of N runs (N/2 shapes x eager + one graph variant) whose jobs are
submitted held (`sbatch --hold`: PENDING for as long as the benchmark needs, never started, so the shared
2-CPU cluster stays free for other users' jobs). Once every run has its job, the controller's process tree
(Snakemake and every process below it) is sampled for a window: summed RSS and PSS (/proc/PID/smaps_rollup, shared
pages divided among their users), the number of processes, the CPU time it spent (utime + stime of the tree, reaped
children included) and the sacct calls it made (a counting wrapper first on PATH).

With --finish the runs then finish together. This 2-CPU cluster runs two jobs at a time, so the benchmark stands in
for N jobs ending at once: within a second it gives every held job the end its job would leave, its training log (a
copy of a real builtin log of the H200 examples, results/examples/h200-builtin: an eager one for eager runs, a
full-iteration one for graph runs) and submitit's result file holding that example run's facts (what the job
function returns). The controller then records, parses, aggregates and reports every run while its tree is sampled
every 0.5 s, until it exits. Then (or after the window) the controller is stopped with SIGINT (Ctrl-C) if it still
runs, and every job of the benchmark is cancelled by id (they carry the Slurm comment
`graphsweep-benchmark-login-node`).

The runs' config.yaml files are written before Snakemake starts (what the plan job writes, by the same
function), so the figures are those of runs in flight, not of the plan job.

    .venv/bin/python benchmarks/login_node.py 100 500                       # this checkout
    .venv/bin/python benchmarks/login_node.py 500 --finish                  # ... and the runs finishing together
    .venv/bin/python benchmarks/login_node.py 100 --code /tmp/graphsweep-main   # another tree (git archive main)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import submitit
import yaml

from graphsweep.layout import SweepPaths
from graphsweep.plan.planner import plan_sweep, submitted, write_run_config
from graphsweep.sweepspec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "results" / "examples" / "h200-builtin" / "runs"  # real builtin runs: their logs and facts
COMMENT = "graphsweep-benchmark-login-node"
TICK = os.sysconf("SC_CLK_TCK")

WRAPPER = """#!/bin/sh
# counting wrapper (benchmarks/login_node.py): one line per call, then the real command
printf '%s\\n' "$(date +%s.%N)" >> {log}
exec {real} "$@"
"""


def spec(runs: int) -> dict:
    return {"sweep": f"login{runs}", "description": "benchmarks/login_node.py: runs in flight, held in the queue",
            "workload": {"kind": "builtin"}, "axes": {"micro_batch": list(range(1, runs // 2 + 1))},
            "fixed": {"hidden": 64, "layers": 1, "heads": 2, "seq_length": 32, "vocab": 128},
            "variants": [{"impl": "full_iteration"}], "repeats": 1, "warmup": 3, "iterations": 10,
            "max_runs": max(runs, 10), "budget_gpu_hours": 1e9,
            "executor": {"cluster": "slurm", "timeout_min": 30}}  # fmt: skip


def workdir(tmp: Path, code: Path, runs: int) -> tuple[Path, Path]:
    """A scratch checkout of `code`'s configs and Slurm profile, for the local cluster, jobs held; counting sacct."""
    shutil.copytree(code / "configs", tmp / "configs")
    profile = tmp / "profiles" / "slurm"
    profile.mkdir(parents=True)
    for f in (code / "profiles" / "slurm").iterdir():
        if f.is_file():
            shutil.copy(f, profile / f.name)
    cluster = yaml.safe_load((profile / "cluster.yaml").read_text())
    cluster["slurm"].update(partition="debug", request_gpus=False, exclusive=False, comment=COMMENT,
                            sbatch={"hold": True})  # fmt: skip
    (profile / "cluster.yaml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    os.symlink("profiles/slurm", tmp / "slurm")
    (tmp / "spec.yaml").write_text(yaml.safe_dump(spec(runs), sort_keys=False))
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    log = bin_dir / "sacct.calls"
    log.touch()
    (bin_dir / "sacct").write_text(WRAPPER.format(real=shutil.which("sacct"), log=log))
    (bin_dir / "sacct").chmod(0o755)
    return bin_dir, log


def write_configs(spec_file: Path, results: Path) -> int:
    """Every run's config.yaml, as the plan job writes it; the number of runs to submit."""
    spec = load_spec(spec_file)
    paths = SweepPaths(results, spec.name)
    todo = submitted(plan_sweep(spec, "slurm", paths))
    for p in todo:
        write_run_config(p, paths.run(p.run.run_id))
    return len(todo)


def pids_below(root: int) -> list[int]:
    """root and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


@dataclass
class Sample:
    processes: int
    rss_mb: float
    pss_mb: float
    cpu_s: float  # utime + stime + reaped children's, of every live process of the tree
    root_rss_mb: float = 0.0  # the Snakemake process alone
    root_pss_mb: float = 0.0


def sample(root: int) -> Sample:
    n, rss, pss, cpu, root_rss, root_pss = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    for pid in pids_below(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            roll = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue  # ended meanwhile
        kb = {line.split(":")[0]: float(line.split()[1]) for line in roll.splitlines()[1:] if line.split()[1:2]}
        n += 1
        rss += kb.get("Rss", 0.0) / 1024
        pss += kb.get("Pss", 0.0) / 1024
        cpu += sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
        if pid == root:
            root_rss, root_pss = kb.get("Rss", 0.0) / 1024, kb.get("Pss", 0.0) / 1024
    return Sample(n, rss, pss, cpu, root_rss, root_pss)


def side_files(sweep_dir: Path) -> dict[str, dict]:
    """Each run's job (.jobs/{run_id}/job.json), by run id."""
    out = {}
    for side in (sweep_dir / ".jobs").glob("*/job.json"):
        try:
            out[side.parent.name] = json.loads(side.read_text())
        except ValueError:
            pass  # being written
    return out


def example_run(arm: str) -> Path:
    """A real builtin run of the H200 examples of this arm (eager, or a full-iteration graph)."""
    return next(d for d in sorted(EXAMPLE.iterdir()) if f".{arm}.r" in d.name)


def finish_all(sides: dict[str, dict]) -> None:
    """Every held job's end as its job would leave it: its training log, then submitit's result file (written aside
    and renamed, as submitit does), holding the facts of a real example run."""
    for run_id, side in sides.items():
        src = example_run("eager" if ".eager." in run_id else "full_iteration")
        facts = {k: v for k, v in json.loads((src / "run.json").read_text()).items()
                 if k in ("provenance", "host", "start_utc", "end_utc", "wall_s", "exit_code", "slurm_nodelist")}
        facts.update(slurm_job_id=str(side["job_id"]), slurm_restart_count=0)
        shutil.copyfile(src / "log.txt", side["log"])
        folder = Path(str(side["folder"]).replace("%j", str(side["job_id"])))
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{side['job_id']}_0_result.pkl.tmp"
        submitit.core.utils.cloudpickle_dump(("success", facts), tmp)
        os.replace(tmp, folder / f"{side['job_id']}_0_result.pkl")


def watch_finishing(ctl: subprocess.Popen, sweep_dir: Path, runs: int, timeout_s: float) -> dict:
    """Sample the controller's tree every 0.5 s from the moment every job ended until the controller exits."""
    t0 = time.monotonic()
    peak = Sample(0, 0.0, 0.0, 0.0)
    recorded = parsed = None
    while ctl.poll() is None and time.monotonic() - t0 < timeout_s:
        s = sample(ctl.pid)
        peak = Sample(max(peak.processes, s.processes), max(peak.rss_mb, s.rss_mb), max(peak.pss_mb, s.pss_mb),
                      s.cpu_s, max(peak.root_rss_mb, s.root_rss_mb), max(peak.root_pss_mb, s.root_pss_mb))  # fmt: skip
        if recorded is None and len(list(sweep_dir.glob("runs/*/run.json"))) >= runs:
            recorded = time.monotonic() - t0
        if parsed is None and len(list(sweep_dir.glob("runs/*/summary.json"))) >= runs:
            parsed = time.monotonic() - t0
        time.sleep(0.5)
    return {"finish_processes": peak.processes, "finish_rss_mb": round(peak.rss_mb),
            "finish_pss_mb": round(peak.pss_mb), "finish_snakemake_rss_mb": round(peak.root_rss_mb),
            "recorded_after_s": recorded, "parsed_after_s": parsed, "exit_after_s": round(time.monotonic() - t0, 1),
            "returncode": ctl.poll(), "report": (sweep_dir / "report.html").exists()}  # fmt: skip


def cancel_mine(job_ids: set[str]) -> None:
    """Every job of this benchmark: the ids it recorded, and any job with its comment (a submission in progress)."""
    listed = subprocess.run(["squeue", "-h", "-o", "%i|%k"], capture_output=True, text=True, timeout=60).stdout
    job_ids |= {line.split("|")[0] for line in listed.splitlines() if line.split("|")[-1] == COMMENT}
    if job_ids:
        subprocess.run(["scancel", *sorted(job_ids)], timeout=120, check=False)


def measure(runs: int, code: Path, window_s: float, settle_s: float, start_timeout_s: float, finish: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="gs-login-bench-") as scratch:
        tmp = Path(scratch)
        bin_dir, sacct_log = workdir(tmp, code, runs)
        path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
        env = {**os.environ, "PYTHONPATH": str(code), "PATH": path}
        n = write_configs(tmp / "spec.yaml", tmp / "results")
        assert n == runs, f"the spec plans {n} runs to submit, not {runs}"
        sweep_dir = tmp / "results" / spec(runs)["sweep"]
        out = open(tmp / "controller.txt", "w")
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(code / "Snakefile"), "--profile", "slurm",
               "--config", "spec=spec.yaml", "--cores", str(runs + 10), "--jobs", str(runs + 10)]  # fmt: skip
        t0 = time.monotonic()
        ctl = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)  # fmt: skip
        ids: set[str] = set()
        try:
            peak = Sample(0, 0.0, 0.0, 0.0)
            while True:
                sides = side_files(sweep_dir)
                ids |= {str(s["job_id"]) for s in sides.values()}
                s = sample(ctl.pid)
                peak = Sample(max(peak.processes, s.processes), max(peak.rss_mb, s.rss_mb),
                              max(peak.pss_mb, s.pss_mb), s.cpu_s)  # fmt: skip
                if len(sides) >= runs:
                    break
                if ctl.poll() is not None or time.monotonic() - t0 > start_timeout_s:
                    raise RuntimeError(f"{len(sides)} of {runs} runs in flight after {time.monotonic() - t0:.0f} s:\n"
                                       + (tmp / "controller.txt").read_text()[-3000:])  # fmt: skip
                time.sleep(1.0)
            in_flight_after = time.monotonic() - t0
            time.sleep(settle_s)
            first = sample(ctl.pid)
            calls_before = len(sacct_log.read_text().splitlines())
            t1 = time.monotonic()
            samples = [first]
            while time.monotonic() - t1 < window_s:
                time.sleep(min(5.0, window_s / 6))
                samples.append(sample(ctl.pid))
            elapsed = time.monotonic() - t1
            calls = len(sacct_log.read_text().splitlines()) - calls_before
            last = samples[-1]
            finished = {}
            if finish:
                finish_all(side_files(sweep_dir))
                finished = watch_finishing(ctl, sweep_dir, runs, start_timeout_s)
            return {**finished,
                "runs": runs, "in_flight_after_s": round(in_flight_after, 1),
                "start_cpu_s": round(first.cpu_s, 1), "start_peak_rss_mb": round(peak.rss_mb),
                "processes": max(x.processes for x in samples),
                "rss_mb": round(max(x.rss_mb for x in samples)), "pss_mb": round(max(x.pss_mb for x in samples)),
                "snakemake_rss_mb": round(max(x.root_rss_mb for x in samples)),
                "snakemake_pss_mb": round(max(x.root_pss_mb for x in samples)),
                "cpu_s_per_min": round((last.cpu_s - first.cpu_s) / elapsed * 60, 2),
                "sacct_per_min": round(calls / elapsed * 60, 1), "window_s": round(elapsed),
            }  # fmt: skip
        finally:
            if ctl.poll() is None:
                os.killpg(ctl.pid, signal.SIGINT)  # Ctrl-C: jobs are left in the queue, cancelled below
                try:
                    ctl.wait(180)
                except subprocess.TimeoutExpired:
                    os.killpg(ctl.pid, signal.SIGKILL)
                    ctl.wait(30)
            cancel_mine(ids)
            out.close()


# What the run rule's script imports before it waits (Snakemake's preamble, then scripts/run.py's imports)
SCRIPT_IMPORTS = ("snakemake.logging", "snakemake.iocontainers", "graphsweep.smk", "{runrule}")
MEMORY = """
import importlib, sys
for m in sys.argv[1:]:
    importlib.import_module(m)
roll = dict(line.split(":") for line in open("/proc/self/smaps_rollup").read().splitlines()[1:])
print(int(roll["Rss"].split()[0]) // 1024, int(roll["Pss"].split()[0]) // 1024)
"""


def script_imports(code: Path) -> tuple[int, int]:
    """(RSS, PSS) in MB of a process that imported what the run rule's script imports, in `code`'s tree."""
    new = (code / "graphsweep" / "run" / "runrule.py").exists()  # main before issue 31: scripts/run.py's submit
    runrule = "graphsweep.run.runrule" if new else "graphsweep.run.submit"
    mods = [m.format(runrule=runrule) for m in SCRIPT_IMPORTS]
    out = subprocess.run([sys.executable, "-c", MEMORY, *mods], env={**os.environ, "PYTHONPATH": str(code)},
                         cwd="/", capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    return int(out[0]), int(out[1])


def _s(seconds: float | None) -> str:
    return "(never)" if seconds is None else f"{seconds:.0f} s"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", type=int, nargs="+", help="runs in flight (even numbers)")
    p.add_argument("--code", type=Path, default=ROOT, help="the graphsweep tree to run (default: this checkout)")
    p.add_argument("--window", type=float, default=60.0, help="seconds sampled once every run is in flight")
    p.add_argument("--settle", type=float, default=15.0, help="seconds between the last submission and the window")
    p.add_argument("--start-timeout", type=float, default=1800.0)
    p.add_argument("--finish", action="store_true", help="then every run finishes at once (see above)")
    args = p.parse_args()
    print(f"code: {args.code.resolve()}", flush=True)
    rss, pss = script_imports(args.code.resolve())
    print(f"the run rule's script, imported (Snakemake's local executor: one such process per run): RSS {rss} MB, "
          f"PSS {pss} MB", flush=True)
    for runs in args.runs:
        r = measure(runs, args.code.resolve(), args.window, args.settle, args.start_timeout, args.finish)
        print(f"{r['runs']} runs in flight (all submitted after {r['in_flight_after_s']:.0f} s, {r['start_cpu_s']:.0f} "
              f"CPU-s): {r['processes']} processes, RSS {r['rss_mb']} MB ({r['rss_mb'] / runs:.1f} MB a run), PSS "
              f"{r['pss_mb']} MB ({r['pss_mb'] / runs:.1f} MB a run; Snakemake itself RSS {r['snakemake_rss_mb']} MB, PSS "
              f"{r['snakemake_pss_mb']} MB); {r['cpu_s_per_min']:.2f} CPU-s a minute, "
              f"{r['sacct_per_min']:.1f} sacct calls a minute (window {r['window_s']} s)", flush=True)  # fmt: skip
        if args.finish:
            print(f"{r['runs']} runs finishing together: at most {r['finish_processes']} processes, RSS "
                  f"{r['finish_rss_mb']} MB, PSS {r['finish_pss_mb']} MB (Snakemake itself RSS "
                  f"{r['finish_snakemake_rss_mb']} MB); every run.json after {_s(r['recorded_after_s'])}, every "
                  f"summary.json after {_s(r['parsed_after_s'])}, the controller done after {_s(r['exit_after_s'])} "
                  f"(exit status {r['returncode']}, report written: {r['report']})", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
