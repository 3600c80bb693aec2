"""graphsweep compare --eager LOG... --graph LOG...: the workflow's verdict for logs you already have.

Each LOG is one run (one job); give several per arm: jobs are the replicates. `--aa` judges two sets of eager
jobs of one configuration against each other (an A/A: no capture evidence is asked of the second set), the way
a sweep's `aa_control` cells measure the false-positive rate.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from graphsweep.commands import console as _console
from graphsweep.commands import plain
from graphsweep.judge import interval as iv
from graphsweep.judge import prose
from graphsweep.judge import verdict as stats
from graphsweep.parse.records import RunSummary
from graphsweep.parse.run import parse_run
from graphsweep.sweepspec.load import schema_default
from graphsweep.vocab import EAGER, GRAPH

NAME = "compare"
HELP = "judge eager vs graph logs of one cell with the same statistics as the workflow (--aa: eager vs eager)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eager", nargs="+", required=True, metavar="LOG", help="eager runs, one log per job")
    p.add_argument("--graph", nargs="+", required=True, metavar="LOG",
                   help="graph runs, one log per job (with --aa: the second set of eager jobs)")
    p.add_argument("--aa", action="store_true",
                   help="A/A: both sides are eager jobs of one configuration; any speedup/slowdown is a false positive")
    p.add_argument("--warmup", type=int, default=schema_default("warmup"),
                   help="cuda_graph_warmup_steps (capture on iteration warmup+1); default %(default)s")
    p.add_argument("--margin", type=float, default=schema_default("margin"),
                   help="practical margin, a fraction in (0, 0.5]; default %(default)s")
    p.add_argument("--look", type=int, choices=(1, 2), default=None,
                   help="judge as look 1 or 2 of an adaptive design (alpha 0.025 each); default: one look, alpha 0.05")
    p.add_argument("--paired", action="store_true", help="the i-th eager and graph logs ran in one job (ABBA)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _problem(args: argparse.Namespace) -> str | None:
    if not math.isfinite(args.margin) or not 0 < args.margin <= 0.5:
        return f"--margin {args.margin}: the practical margin is a fraction in (0, 0.5], e.g. 0.02 for 2%"
    if args.warmup < 0:
        return f"--warmup {args.warmup}: cuda_graph_warmup_steps is 0 or more"
    if args.paired and len(args.eager) != len(args.graph):
        return f"--paired needs one eager and one graph log per pair job (got {len(args.eager)} and {len(args.graph)})"
    for path in (*args.eager, *args.graph):
        p = Path(path)
        if not p.is_file():
            return f"{path}: no such log file" if not p.exists() else f"{path}: not a file"
    return None


def parsed_run(path: str, arm: str, warmup: int) -> tuple[RunSummary, pd.DataFrame]:
    parsed = parse_run([Path(path)], arm=arm, warmup=warmup, run_id=path)
    return parsed.summary, parsed.iterations


def arm_run(path: str, s: RunSummary, it: pd.DataFrame, mem: str | None) -> stats.ArmRun:
    times: list[float] = []
    if s.steady_first is not None:
        steady = it[(it.iteration >= s.steady_first) & (it.iteration <= s.steady_last)]
        times = steady.elapsed_ms.dropna().astype(float).tolist()
    loss = {int(i): float(x) for i, x in zip(it.iteration, it.loss)} if "loss" in it.columns else {}
    return stats.ArmRun(path, s.outcome, times, s.elapsed_resolution_ms, getattr(s, mem) if mem else None, s.reason,
                        s.error_class, s.seed, loss)


def memory_figure(eager: list[RunSummary], graph: list[RunSummary]) -> str | None:
    """The first of the workflow's MEMORY_FIGURES that logs of both arms recorded (one figure for both arms)."""
    for col in stats.MEMORY_FIGURES:
        if any(getattr(s, col) is not None for s in eager) and any(getattr(s, col) is not None for s in graph):
            return col
    return None


def run(args: argparse.Namespace) -> int:
    if problem := _problem(args):
        _console(stderr=True).print(plain(f"graphsweep compare: {problem}"))
        return 2
    e_parsed = [parsed_run(p, EAGER, args.warmup) for p in args.eager]
    g_parsed = [parsed_run(p, EAGER if args.aa else GRAPH, args.warmup) for p in args.graph]
    mem = memory_figure([s for s, _ in e_parsed], [s for s, _ in g_parsed])
    eager = [arm_run(p, s, it, mem) for p, (s, it) in zip(args.eager, e_parsed)]
    graph = [arm_run(p, s, it, mem) for p, (s, it) in zip(args.graph, g_parsed)]
    alpha = iv.alpha_for_look(args.look, 2) if args.look else iv.alpha_for_look(1, 1)
    v = stats.judge_cell(eager, graph, margin=args.margin, alpha=alpha, paired=args.paired, control=args.aa,
                         mem_metric=mem)
    out = {**asdict(v), "aa": args.aa, "reason": prose.reason(asdict(v)), "method": prose.method(asdict(v))}
    console = _console()
    if args.json:
        print(json.dumps(out, default=str))
        return 0
    head = f"{'A/A ' if args.aa else ''}{v.verdict}"
    if v.speedup is not None:
        head += f": {prose.interval(out)}; {out['method']}"
    console.print(plain(head), soft_wrap=True)
    console.print(plain(out["reason"]), soft_wrap=True)
    return 0
