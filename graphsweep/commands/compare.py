"""graphsweep compare --eager LOG... --graph LOG...: the workflow's verdict for logs you already have.

Each LOG is one run (one job); give several per arm: jobs are the replicates. `--aa` judges two sets of eager
jobs of one configuration against each other (an A/A: no capture evidence is asked of the second set), the way
a sweep's `aa_control` cells measure the false-positive rate. `--reference` adds eager-like runs of the same
configuration (a sweep's A/A control runs) as loss references only, as the workflow does with a shape's control
runs: checked against the eager runs first, never part of the timing.
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
from graphsweep.judge.compare import judge_runs
from graphsweep.parse.records import summary_to_dict
from graphsweep.parse.run import parse_run
from graphsweep.sweepspec.load import schema_default
from graphsweep.vocab import EAGER, GRAPH

NAME = "compare"
SAME_SEED = -1  # --same-seed without a seed in any log: one placeholder seed for all of them
NO_JOB = {"job_id": None}  # run.json of a run no job of graphsweep's ran (run/ingest.py writes the same)
HELP = "judge eager vs graph logs of one cell with the same statistics as the workflow (--aa: eager vs eager)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eager", nargs="+", required=True, metavar="LOG", help="eager runs, one log per job")
    p.add_argument("--graph", nargs="+", required=True, metavar="LOG",
                   help="graph runs, one log per job (with --aa: the second set of eager jobs)")
    p.add_argument("--reference", nargs="+", default=[], metavar="LOG",
                   help="more eager runs of this configuration (e.g. a sweep's A/A control runs): loss references "
                        "only, checked against the eager runs like the workflow's A/A runs; never the timing")
    p.add_argument("--aa", action="store_true",
                   help="A/A: both sides are eager jobs of one configuration; any speedup/slowdown is a false positive")
    p.add_argument("--warmup", type=int, default=schema_default("warmup"),
                   help="cuda_graph_warmup_steps (capture on iteration warmup+1); default %(default)s")
    p.add_argument("--margin", type=float, default=schema_default("margin"),
                   help="practical margin, a fraction in (0, 0.5]; default %(default)s")
    p.add_argument("--look", type=int, choices=(1, 2), default=None,
                   help="judge as look 1 or 2 of an adaptive design (alpha 0.025 each); default: one look, alpha 0.05")
    p.add_argument("--paired", action="store_true", help="the i-th eager and graph logs ran in one job (ABBA)")
    seed = p.add_mutually_exclusive_group()
    seed.add_argument("--seed", type=int, default=None,
                      help="the training seed of every log that does not print one (Megatron's '> setting random "
                           "seeds to N ...' or its config dump's [rng] seed); loss parity compares runs of one seed")
    seed.add_argument("--same-seed", action="store_true",
                      help="all logs trained from one seed (the logs that print theirs must agree)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _problem(args: argparse.Namespace) -> str | None:
    if not math.isfinite(args.margin) or not 0 < args.margin <= 0.5:
        return f"--margin {args.margin}: the practical margin is a fraction in (0, 0.5], e.g. 0.02 for 2%"
    if args.warmup < 0:
        return f"--warmup {args.warmup}: cuda_graph_warmup_steps is 0 or more"
    if args.paired and len(args.eager) != len(args.graph):
        return f"--paired needs one eager and one graph log per pair job (got {len(args.eager)} and {len(args.graph)})"
    seen: dict[tuple[int, int], str] = {}
    for path in (*args.eager, *args.graph, *args.reference):
        p = Path(path)
        if not p.is_file():
            return f"{path}: no such log file" if not p.exists() else f"{path}: not a file"
        st = p.stat()  # the file itself: `./x.log`, a symbolic link and a hard link to it are one log
        if (st.st_dev, st.st_ino) in seen:
            first = seen[(st.st_dev, st.st_ino)]
            also = "" if first == path else f" ({path} is {first} again: another spelling of its path, or a link)"
            return f"a log is given twice{also}: each log is one job of one arm"
        seen[(st.st_dev, st.st_ino)] = path
    if args.aa and args.reference:
        return "--reference with --aa: an A/A compares two sets of eager runs; give the extra runs to --eager"
    return None


def _window_problem(args: argparse.Namespace, runs: pd.DataFrame) -> str | None:
    """--warmup beyond every log's last iteration leaves no steady window in any of them: say so, not 'no runs'."""
    last = pd.to_numeric(runs.get("last_iteration"), errors="coerce").max() if len(runs) else None
    if last is not None and pd.notna(last) and args.warmup + 2 > last:
        return (f"--warmup {args.warmup}: the steady window starts at iteration warmup + 2 = {args.warmup + 2}, but "
                f"the logs end by iteration {int(last)}: give the cuda_graph_warmup_steps the runs used")
    return None


def parsed_runs(paths: list[str], arm: str, warmup: int) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """The logs as the workflow's tables: one runs.parquet-like row per log (run id = the path), its iterations."""
    rows, its = [], []
    for path in paths:
        # a log you already have: no job graphsweep can rerun (a preempted or cancelled end is no result, as ingest's)
        parsed = parse_run([Path(path)], arm=arm, warmup=warmup, run_id=path, run_info=NO_JOB)
        rows.append({**summary_to_dict(parsed.summary), "run_id": path})
        its.append(parsed.iterations.assign(run_id=path))
    return pd.DataFrame(rows), its


def seeds_for(runs: pd.DataFrame, seed: int | None, same_seed: bool) -> tuple[dict[str, int], str | None]:
    """run id -> the seed to compare losses by, for the logs that print none; or a problem."""
    stated = {rid: int(x) for rid, x in zip(runs.run_id, runs.seed) if x is not None and pd.notna(x)}
    if same_seed:
        values = set(stated.values())
        if len(values) > 1:
            shown = ", ".join(f"{rid}: {x}" for rid, x in stated.items())
            return {}, f"--same-seed: the logs print different seeds ({shown})"
        seed = values.pop() if values else SAME_SEED
    if seed is None:
        return {}, None
    return {rid: seed for rid in runs.run_id if rid not in stated}, None


def run(args: argparse.Namespace) -> int:
    if problem := _problem(args):
        _console(stderr=True).print(plain(f"graphsweep compare: {problem}"))
        return 2
    eager, e_its = parsed_runs(args.eager, EAGER, args.warmup)
    graph, g_its = parsed_runs(args.graph, EAGER if args.aa else GRAPH, args.warmup)
    ref, r_its = parsed_runs(args.reference, EAGER, args.warmup) if args.reference else (None, [])
    if problem := _window_problem(args, pd.concat([eager, graph])):
        _console(stderr=True).print(plain(f"graphsweep compare: {problem}"))
        return 2
    seeds, problem = seeds_for(pd.concat([eager, graph, *([ref] if ref is not None else [])]), args.seed,
                               args.same_seed)
    if problem:
        _console(stderr=True).print(plain(f"graphsweep compare: {problem}"))
        return 2
    by_run = {df.run_id.iloc[0]: df for df in (*e_its, *g_its, *r_its) if len(df)}
    alpha = iv.alpha_for_look(args.look, 2) if args.look else iv.alpha_for_look(1, 1)
    v = judge_runs(eager, graph, by_run, seeds, margin=args.margin, alpha=alpha, paired=args.paired, control=args.aa,
                   reference_runs=ref)
    row = {**asdict(v), "q_value": v.p_beyond}  # one cell: its own family
    out = {**row, "aa": args.aa, "reason": prose.reason(row), "method": prose.method(row)}
    if args.json:
        print(json.dumps(out, default=str))
        return 0
    console = _console()
    head = f"{'A/A ' if args.aa else ''}{v.verdict}"
    if v.speedup is not None:
        head += f": {prose.interval(out)}; {out['method']}"
    console.print(plain(head), soft_wrap=True)
    console.print(plain(out["reason"]), soft_wrap=True)
    if text := prose.parity(row):
        console.print(plain(text if text.startswith("loss parity") else f"loss parity: {text}"), soft_wrap=True)
    return 0
