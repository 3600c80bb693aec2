"""Where the start-up of one builtin run goes, phase by phase, as the workflow starts it.

A run of the local executor is two Python processes: submitit's job process (``python -m
submitit.core._submit``: imports submitit and graphsweep, unpickles the job, collects the job's provenance with
nvidia-smi and git) and the training process it starts (``python -m graphsweep.entry.builtin_gpt``: imports torch, makes the
CUDA context, prints the provenance line, builds the model, runs iteration 1 with its cuBLAS / kernel warm-up).
This script times each phase in fresh processes of this interpreter and prints one line per phase, then the
whole training process for comparison (`benchmarks/pipeline_overhead.py` gives the job-level figure).

    python benchmarks/startup_breakdown.py                       # the launch-bound shape of h200-builtin.yaml
    python benchmarks/startup_breakdown.py --hidden 1024 --layers 8 --heads 16 --seq-length 512 --micro-batch 2

Runs on a CPU too (no CUDA phases then).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One fresh training-like process: the same imports and steps as graphsweep.entry.builtin_gpt.main, in order.
PHASES = r"""
import json, sys, time
t = [("interpreter (to the first statement)", time.perf_counter())]
import torch
t.append(("import torch", time.perf_counter()))
from graphsweep import provenance
from graphsweep.entry import builtin_gpt as workload
t.append(("import the builtin trainer", time.perf_counter()))
cuda = torch.cuda.is_available()
if cuda:
    torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
t.append(("CUDA context", time.perf_counter()))
provenance.log_line()
t.append(("provenance line (nvidia-smi)", time.perf_counter()))
cfg = workload.parse_config(sys.argv[1:])
dev = torch.device("cuda" if cuda else "cpu")
dtype = torch.bfloat16 if cuda else torch.float32
torch.manual_seed(cfg.seed)
model = workload.GPT(cfg.vocab, cfg.hidden, cfg.heads, cfg.layers, cfg.seq_length).to(device=dev, dtype=dtype)
opt = torch.optim.AdamW(model.parameters(), lr=workload.LR)
tokens = torch.randint(0, cfg.vocab, (cfg.micro_batch, cfg.seq_length), device=dev)
labels = torch.randint(0, cfg.vocab, (cfg.micro_batch, cfg.seq_length), device=dev)
sync = torch.cuda.synchronize if cuda else (lambda: None)
sync()
t.append(("model build + optimizer", time.perf_counter()))
for i in (1, 2):
    loss, gn = workload.train_step(model, opt, tokens, labels); loss.item(); sync()
    t.append((f"iteration {i}", time.perf_counter()))
print(json.dumps([(name, b - a) for (name, b), (_, a) in zip(t[1:], t[:-1])]))
"""
JOB_SIDE = r"""
import json, time
t0 = time.perf_counter()
import submitit  # noqa: F401
t1 = time.perf_counter()
from graphsweep import provenance
t2 = time.perf_counter()
provenance.collect(probe_torch=False)
t3 = time.perf_counter()
print(json.dumps([("job: import submitit", t1 - t0), ("job: import graphsweep.provenance", t2 - t1),
                  ("job: provenance.collect (nvidia-smi, git)", t3 - t2)]))
"""


def wall(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return time.perf_counter() - t0, out.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per figure (median printed)")
    a = p.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    shape = ["--hidden", str(a.hidden), "--layers", str(a.layers), "--heads", str(a.heads), "--seq-length",
             str(a.seq_length), "--micro-batch", str(a.micro_batch)]
    py = sys.executable
    empty = statistics.median(wall([py, "-c", "pass"], env)[0] for _ in range(a.repeats))
    phases: dict[str, list[float]] = {}
    for script, args in ((JOB_SIDE, []), (PHASES, [*shape, "--iters", "2"])):
        for _ in range(a.repeats):
            for name, seconds in json.loads(wall([py, "-c", script, *args], env)[1].strip().splitlines()[-1]):
                phases.setdefault(name, []).append(seconds)
    whole = statistics.median(wall([py, "-m", "graphsweep.entry.builtin_gpt", *shape, "--iters", "24"], env)[0]
                              for _ in range(a.repeats))
    print(f"python {sys.version.split()[0]}, shape {' '.join(shape)}, median of {a.repeats} fresh processes")
    print(f"  {'python -c pass (interpreter start and exit)':<46} {empty:7.3f} s")
    for name, values in phases.items():
        print(f"  {name:<46} {statistics.median(values):7.3f} s")
    print(f"  {'whole training process (24 iterations)':<46} {whole:7.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
