"""Would a pre-imported parent that forks a fresh training process per run cut start-up, and what does ending the
training process with os._exit save? (issue 31 item 5; measured before anything changed)

Part 1, the committed H200 Megatron runs (results/examples/megatron-*, the runs.parquet time columns and each run's
log): where a run's start-up goes. Before Megatron's initialize: the job from its start to the moment Megatron
starts to initialize (submitit's job process, the Megatron entry's interpreter and imports, the recipe's config);
Megatron's initialize (its own `time to initialize megatron` figure); after it: model, optimizer and data
loaders, to the first iteration. And the teardown the runs had (they ended before the entry's os._exit).

Part 2, this machine with the Megatron venv (GRAPHSWEEP_MEGATRON_PYTHON or ~/mbvenv/venv/bin/python, CPU only):
the imports the Megatron entry makes before pretrain() (megatron.bridge.training.pretrain and gpt_step, the
recipes, omegaconf_utils), timed in fresh processes (page cache warm: the first process is discarded) and in a
child forked from a parent that holds them (fork to the child's first line after the same imports; the process stays
the unit of repetition); and the interpreter's teardown after them (normal exit against os._exit).

    .venv/bin/python benchmarks/fork_startup.py
    .venv/bin/python benchmarks/fork_startup.py --repeats 5 --python ~/mbvenv/venv/bin/python
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from graphsweep import logformat as lf
from graphsweep.store.tables import read_table
from graphsweep.layout import RunDir

REPO = Path(__file__).resolve().parents[1]
SWEEPS = ("megatron-tiny-vanilla-gpt", "megatron-tiny-moe", "megatron-1b-dense", "megatron-moe-128e",
          "megatron-moe-128e-padded")
# MCore training/utils.py barrier_and_log: f"[{string}] datetime: {time_str} " (Bridge prints the same lines)
AFTER_INIT = re.compile(r"\[after megatron is initialized\] datetime: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
INIT_S = re.compile(re.escape(lf.INIT_SECONDS) + r"([\d.]+)")

ENTRY_IMPORTS = ("megatron.bridge.training.pretrain", "megatron.bridge.training.gpt_step",
                 "megatron.bridge.training.utils.omegaconf_utils", "megatron.bridge.recipes")  # fmt: skip

# fresh: time the imports in this process; fork: import them, then fork a child that times the same imports
PROBE = r"""
import importlib, json, os, sys, time
mods, mode, ending = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
def load():
    t0 = time.perf_counter(); c0 = time.process_time()
    for m in mods:
        importlib.import_module(m)
    return time.perf_counter() - t0, time.process_time() - c0
if mode == "fresh":
    wall, cpu = load()
    print(json.dumps({"import_s": wall, "import_cpu_s": cpu}), flush=True)
    sys.stdout.write(json.dumps({"exit_from": time.time()}) + "\n"); sys.stdout.flush()
    os._exit(0) if ending == "os_exit" else sys.exit(0)
load()
threads = len(os.listdir("/proc/self/task"))  # a fork copies only the calling thread: the others' locks stay held
r, w = os.pipe()
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.close(r)
    wall, cpu = load()
    os.write(w, json.dumps({"fork_to_ready_s": time.perf_counter() - t0, "import_s": wall}).encode())
    os._exit(0)
os.close(w)
data = os.read(r, 4096)
os.waitpid(pid, 0)
print(json.dumps({**json.loads(data), "parent_threads": threads}), flush=True)
os._exit(0)
"""


def _stamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def h200_startup() -> list[str]:
    """One line per committed Megatron sweep: its runs' start-up in parts, and their teardown (medians, s)."""
    out = []
    for name in SWEEPS:
        sweep = REPO / "results" / "examples" / name
        if not (sweep / "runs.parquet").exists():
            continue
        runs = read_table(sweep / "runs.parquet", "runs")
        before, init, after = [], [], []
        for r in runs.itertuples():
            text = RunDir(sweep / "runs" / r.run_id).log.read_text(errors="replace")
            a, i = AFTER_INIT.search(text), INIT_S.search(text)
            if not (a and i) or r.start_utc is None or r.time_startup_s != r.time_startup_s:
                continue
            start = r.start_utc.to_pydatetime().replace(tzinfo=None)  # the H200 host's stamps are UTC (zone 0)
            init_end = (_stamp(a[1]) - start).total_seconds()
            before.append(init_end - float(i[1]))
            init.append(float(i[1]))
            after.append(float(r.time_startup_s) - init_end)
        if before:
            m = statistics.median
            out.append(f"  {name:<26} {len(before):2d} runs: start-up {m(runs.time_startup_s):5.1f} s = before "
                       f"Megatron's initialize {m(before):5.1f} + initialize {m(init):4.1f} + model, optimizer, data "
                       f"to the first iteration {m(after):4.1f} (±1 s: whole-second stamps); teardown "
                       f"{m(runs.time_teardown_s):4.1f} s")  # fmt: skip
    return out


def probe(python: str, mode: str, ending: str = "exit") -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = dt.datetime.now().timestamp()
    proc = subprocess.run([python, "-c", PROBE, ",".join(ENTRY_IMPORTS), mode, ending], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})  # fmt: skip
    end = dt.datetime.now().timestamp()
    if proc.returncode != 0:
        raise SystemExit(f"{python}: the probe failed: {proc.stderr.strip()[-2000:]}")
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    rec = {k: v for d in lines for k, v in d.items()}
    rec["process_s"] = end - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rec["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if "exit_from" in rec:
        rec["teardown_s"] = end - rec["exit_from"]  # the last line to the process's end, as the job sees it
    return rec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", default=os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON")
                   or str(Path.home() / "mbvenv" / "venv" / "bin" / "python"))  # fmt: skip
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    print("H200 Megatron runs (committed): where start-up goes")
    print("\n".join(h200_startup()) or "  (no committed Megatron sweep)")
    if not Path(args.python).exists():
        print(f"no Megatron venv at {args.python}: part 2 skipped")
        return 0
    probe(args.python, "fresh")  # warms the page cache: the figures below are warm-cache imports
    m = statistics.median
    fresh = [probe(args.python, "fresh") for _ in range(args.repeats)]
    fresh_exit = [probe(args.python, "fresh", "os_exit") for _ in range(args.repeats)]
    forked = [probe(args.python, "fork") for _ in range(args.repeats)]
    print(f"This machine, {args.python} (CPU only), the Megatron entry's imports before pretrain(), median of "
          f"{args.repeats}:")
    print(f"  fresh process: imports {m(r['import_s'] for r in fresh):.2f} s ({m(r['import_cpu_s'] for r in fresh):.2f} "
          f"CPU-s), whole process {m(r['process_s'] for r in fresh):.2f} s")
    print(f"  forked from a parent that holds them: fork to ready {m(r['fork_to_ready_s'] for r in forked) * 1e3:.1f} "
          f"ms (its imports {m(r['import_s'] for r in forked) * 1e3:.2f} ms); the parent had "
          f"{m(r['parent_threads'] for r in forked):.0f} threads when it forked")
    print(f"  teardown after them (last line to the process's end): normal exit "
          f"{m(r['teardown_s'] for r in fresh):.3f} s, os._exit {m(r['teardown_s'] for r in fresh_exit):.3f} s; the "
          f"whole process {m(r['process_cpu_s'] for r in fresh):.2f} CPU-s against "
          f"{m(r['process_cpu_s'] for r in fresh_exit):.2f} with os._exit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
