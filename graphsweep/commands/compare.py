"""graphsweep compare --eager LOG... --graph LOG... [--graph LOG...]: the workflow's verdict for logs you already have.

Each LOG is one run (one job); give several per arm: jobs are the replicates. Each --graph is one variant (a cell);
with several, they share the eager runs and the workflow's family gate (Benjamini-Hochberg over the cells), as a
sweep's variants of one shape do; with one, the cell is judged alone and the output says so. The interval is the one
the workflow's decision loop gives a cell with that many jobs per arm (judge/compare.py one_look; --one-look: the
fixed design, one look at alpha 0.05). `--aa` judges two sets of eager
jobs of one configuration against each other (an A/A: no capture evidence is asked of the second set), the way
a sweep's `aa_control` cells measure the false-positive rate. `--reference` adds eager-like runs of the same
configuration (a sweep's A/A control runs) as loss references only, as the workflow does with a shape's control
runs: checked against the eager runs first, never part of the timing.

The arms are compared only when they did the same work: every log's training configuration (Bridge's configuration
summary, Megatron-LM's arguments) and the global batch size of its iteration lines must agree, the graph settings
aside (judge/work.py); `--may-differ KEY` names more keys that may differ. Otherwise the verdict is not-comparable,
naming the keys and each arm's values.
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
from graphsweep.judge.compare import family_gate, judge_runs, one_look
from graphsweep.parse.run import parse_run
from graphsweep.sweepspec.load import block_defaults, schema_default
from graphsweep.vocab import AA, COMPLETED, EAGER, GRAPH

NAME = "compare"
SAME_SEED = -1  # --same-seed without a seed in any log: one placeholder seed for all of them
NO_JOB = {"job_id": None}  # run.json of a run no job of graphsweep's ran (run/ingest.py writes the same)
HELP = "judge eager vs graph logs of one cell with the same statistics as the workflow (--aa: eager vs eager)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eager", nargs="+", required=True, metavar="LOG", help="eager runs, one log per job")
    p.add_argument("--graph", nargs="+", required=True, metavar="LOG", action="append",
                   help="graph runs of one variant, one log per job (with --aa: the second set of eager jobs); give "
                        "--graph again for another variant of the same shape")
    p.add_argument("--names", default=None, metavar="A,B,...",
                   help="the variants' names, in --graph order (default: graph 1, graph 2, ...)")
    p.add_argument("--reference", nargs="+", default=[], metavar="LOG",
                   help="more eager runs of this configuration (e.g. a sweep's A/A control runs): loss references "
                        "only, checked against the eager runs like the workflow's A/A runs; never the timing")
    p.add_argument("--aa", action="store_true",
                   help="A/A: both sides are eager jobs of one configuration; any speedup/slowdown is a false positive")
    p.add_argument("--warmup", type=int, default=schema_default("warmup"),
                   help="cuda_graph_warmup_steps (capture on iteration warmup+1); default %(default)s")
    p.add_argument("--margin", type=float, default=schema_default("margin"),
                   help="practical margin, a fraction in (0, 0.5]; default %(default)s")
    p.add_argument("--one-look", action="store_true",
                   help="judge as a sweep with decide.enabled: false (one look at alpha 0.05); default: the interval "
                        "the decision loop gives a cell with this many jobs per arm")
    p.add_argument("--paired", action="store_true", help="the i-th eager and graph logs ran in one job (ABBA)")
    p.add_argument("--may-differ", nargs="+", default=[], metavar="KEY",
                   help="training-configuration keys (or fnmatch patterns, e.g. 'logger.*') whose values may differ "
                        "between the arms beyond the graph settings, as a sweep spec's arms_may_differ")
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
    if args.paired and any(len(args.eager) != len(g) for g in args.graph):
        return (f"--paired needs one eager and one graph log per pair job (got {len(args.eager)} and "
                f"{', '.join(str(len(g)) for g in args.graph)})")
    if args.aa and len(args.graph) > 1:
        return "--aa compares one second set of eager runs: give --graph once"
    names = _names(args)
    if len(names) != len(args.graph) or len(set(names)) != len(names) or not all(names):
        return f"--names {args.names}: give one distinct name per --graph ({len(args.graph)})"
    seen: dict[tuple[int, int], tuple[str, str]] = {}
    given = [(path, option) for option, paths in (("--eager", [args.eager]), ("--graph", args.graph),
                                                  ("--reference", [args.reference])) for logs in paths
             for path in logs]
    for path, option in given:
        p = Path(path)
        if not p.is_file():
            return f"{path}: no such log file" if not p.exists() else f"{path}: not a file"
        st = p.stat()  # the file itself: `./x.log`, a symbolic link and a hard link to it are one log
        if (st.st_dev, st.st_ino) in seen:
            first, where = seen[(st.st_dev, st.st_ino)]
            also = "" if first == path else f" ({path} is {first} again: another spelling of its path, or a link)"
            options = f"to {option} twice" if where == option else f"to {where} and to {option}"
            return f"a log is given twice: {path} {options}{also}; each log is one job of one arm"
        seen[(st.st_dev, st.st_ino)] = (path, option)
    if args.aa and args.reference:
        return "--reference with --aa: an A/A compares two sets of eager runs; give the extra runs to --eager"
    return None


def _names(args: argparse.Namespace) -> list[str]:
    if args.names:
        return [n.strip() for n in args.names.split(",")]
    return [GRAPH] if len(args.graph) == 1 else [f"{GRAPH} {i}" for i in range(1, len(args.graph) + 1)]


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
        rows.append({**parsed.summary.to_dict(), "run_id": path})
        its.append(parsed.iterations.assign(run_id=path))
    return pd.DataFrame(rows), its


def reference_intake(ref: pd.DataFrame | None) -> tuple[pd.DataFrame | None, list[dict[str, str]], str | None]:
    """The --reference logs a loss band may use: (the usable ones, the excluded ones with why, a problem).

    A reference is an eager run of the cell's configuration: a log that shows CUDA-graph capture or replay is a
    graph run, and refused naming it (it would widen the band the graph is judged by). One that did not complete
    (empty, cut, crashed) holds no loss curve to compare: left out, and said so."""
    if ref is None:
        return None, [], None
    graphs = ref[ref.capture_seen.fillna(False).astype(bool) | ref.replay_seen.fillna(False).astype(bool)]
    if len(graphs):
        row = graphs.iloc[0]
        return None, [], (f"--reference {row.run_id}: not an eager run ({row.reason}); a loss reference is an eager "
                          "run of the same configuration (a sweep's A/A control run)")
    done = ref.outcome == COMPLETED
    excluded = [{"log": r.run_id, "outcome": r.outcome, "reason": r.reason} for r in ref[~done].itertuples()]
    return (ref[done].reset_index(drop=True) if done.any() else None), excluded, None


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
    graphs = [parsed_runs(g, EAGER if args.aa else GRAPH, args.warmup) for g in args.graph]
    ref, r_its = parsed_runs(args.reference, EAGER, args.warmup) if args.reference else (None, [])
    ref, excluded, problem = reference_intake(ref)
    if problem or (problem := _window_problem(args, pd.concat([eager, *(g for g, _ in graphs)]))):
        _console(stderr=True).print(plain(f"graphsweep compare: {problem}"))
        return 2
    seeds, problem = seeds_for(pd.concat([eager, *(g for g, _ in graphs), *([ref] if ref is not None else [])]),
                               args.seed, args.same_seed)
    if problem:
        _console(stderr=True).print(plain(f"graphsweep compare: {problem}"))
        return 2
    by_run = {df.run_id.iloc[0]: df for df in (*e_its, *(i for _, its in graphs for i in its), *r_its) if len(df)}
    decide = None if args.one_look else block_defaults("decide") | {"enabled": True}
    rows = []
    for name, (graph, _) in zip(_names(args), graphs):
        look = one_look(len(graph), decide)  # the loop's look is counted in the cell's own jobs
        v = judge_runs(eager, graph, by_run, seeds, margin=args.margin, alpha=iv.ALPHA, paired=args.paired,
                       control=args.aa, reference_runs=ref, may_differ=args.may_differ, look=look,
                       design=look.design if look else None)
        rows.append({**asdict(v), "cell_id": name, "variant": AA if args.aa else name, "alpha": iv.ALPHA,
                     "look": look.k if look else 1})
    frame = family_gate(pd.DataFrame(rows))  # the workflow's family rule over the cells given (one: its own family)
    out = []
    for row in frame.to_dict("records"):
        out.append({**row, "aa": args.aa, "reason": prose.reason(row), "method": prose.method(row),
                    "references_excluded": excluded})
    alone = len(out) == 1
    if args.json:
        print(json.dumps({**out[0], "judged_alone": True} if alone else out, default=str))
        return 0
    console = _console()
    for row in out:
        head = f"{'' if alone else row['cell_id'] + ': '}{'A/A ' if args.aa else ''}{row['verdict']}"
        if row.get("speedup") is not None and pd.notna(row.get("speedup")):
            head += f": {prose.interval(row)}; {row['method']}"
        console.print(plain(head), soft_wrap=True)
        console.print(plain(row["reason"]), soft_wrap=True)
        if text := prose.parity(row):
            console.print(plain(text if text.startswith("loss parity") else f"loss parity: {text}"), soft_wrap=True)
    for e in excluded:
        console.print(plain(f"reference {e['log']} excluded: {e['outcome']} ({e['reason']})"), soft_wrap=True)
    if alone:
        console.print(plain("one cell, judged alone: a sweep's family check (Benjamini-Hochberg over its cells) would "
                            "take its other variants too; give each with --graph to judge them together"),
                      soft_wrap=True)
    return 0
