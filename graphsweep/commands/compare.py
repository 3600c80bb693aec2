"""graphsweep compare --eager LOG... --graph LOG...: the workflow's verdict for logs you already have.

Each LOG is one run (one job); give several per arm for a between-job confidence interval.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from graphsweep.judge import verdict as stats
from graphsweep.parse.run import parse_run
from graphsweep.vocab import EAGER, GRAPH

NAME = "compare"
HELP = "judge eager vs graph logs of one cell with the same statistics as the workflow"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eager", nargs="+", required=True, metavar="LOG", help="eager runs, one log per job")
    p.add_argument("--graph", nargs="+", required=True, metavar="LOG", help="graph runs, one log per job")
    p.add_argument("--warmup", type=int, default=3, help="cuda_graph_warmup_steps (capture on iteration warmup+1)")
    p.add_argument("--margin", type=float, default=0.02, help="practical margin (default 0.02 = 2%%)")
    p.add_argument("--paired", action="store_true", help="the i-th eager and graph logs ran on the same GPUs")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def arm_run(path: str, arm: str, warmup: int) -> stats.ArmRun:
    parsed = parse_run([Path(path)], arm=arm, warmup=warmup, run_id=path)
    s = parsed.summary
    steady = parsed.iterations
    if s.steady_first is not None:
        steady = steady[(steady.iteration >= s.steady_first) & (steady.iteration <= s.steady_last)]
        times = steady.elapsed_ms.dropna().astype(float).tolist()
    else:
        times = []
    return stats.ArmRun(path, s.outcome, times, s.peak_mem_gb, s.reason, s.error_class)


def run(args: argparse.Namespace) -> int:
    eager = [arm_run(p, EAGER, args.warmup) for p in args.eager]
    graph = [arm_run(p, GRAPH, args.warmup) for p in args.graph]
    v = stats.judge_cell(eager, graph, margin=args.margin, paired=args.paired)
    out = {k: getattr(v, k) for k in v.__dataclass_fields__}
    if args.json:
        print(json.dumps(out, default=str))
        return 0
    if v.speedup is not None:
        print(f"{v.verdict}: {v.speedup:.3f}x [{v.ci_low:.3f}, {v.ci_high:.3f}] (eager {v.eager_step_ms:.2f} ms, "
              f"graph {v.graph_step_ms:.2f} ms; {v.ci_method})")  # fmt: skip
    else:
        print(v.verdict)
    print(v.reason)
    return 0
