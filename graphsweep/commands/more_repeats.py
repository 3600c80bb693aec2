"""graphsweep more-repeats SPEC [--target-repeats N | --auto] [--results DIR]: more jobs for inconclusive cells only.

Reads results/{sweep}/comparison.parquet, picks the cells whose verdict is `inconclusive`, and writes the repeats
they need to results/{sweep}/extra_repeats.yaml; rerunning `snakemake` then submits exactly those new runs (new
repeat indices of the cell's graph arm and of its shape's eager baseline, or new pair jobs) and touches nothing
finished. `--auto` (the default) asks the statistics for the repeats the observed spread needs, capped.
"""

from __future__ import annotations

import argparse

from rich.table import Table

from graphsweep.commands import console as _console
from graphsweep.commands import plain
from graphsweep.plan.owner import SweepOwnedError, check_owner
from graphsweep.plan.repeats import (
    DEFAULT_CAP,
    RepeatsError,
    apply_extra,
    extra_repeats_path,
    plan_more_repeats,
    require_adaptive,
    write_extra,
)
from graphsweep.sweepspec.load import load_spec
from graphsweep.store.tables import read_table
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile
from graphsweep.records import SpecError

NAME = "more-repeats"
HELP = "plan more repeats for the inconclusive cells of a finished sweep; the next snakemake runs only those"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (YAML) of a sweep that has a comparison.parquet")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--target-repeats", type=int, metavar="N", help="give every inconclusive cell N repeats per arm")
    how.add_argument("--auto", action="store_true",
                     help="repeats the observed spread needs to clear the margin (default), capped by --max-repeats")
    p.add_argument("--max-repeats", type=int, default=DEFAULT_CAP, metavar="N",
                   help=f"cap for --auto (default {DEFAULT_CAP} repeats per arm)")
    p.add_argument("--results", default="results", help="results folder of the workflow (default: results)")
    p.add_argument("--dry-run", action="store_true", help="print the plan; write no extra_repeats.yaml")


def run(args: argparse.Namespace) -> int:
    err = _console(stderr=True)
    try:
        spec = load_spec(args.spec)
        check_owner(SweepPaths(args.results, spec.name), spec)  # the repeats go to this spec's own sweep only
        spec = apply_extra(spec, args.results)
        if not spec.is_ingest:
            require_adaptive(spec)  # before looking for results: a spec judged for one look gets no second
    except (SpecError, RepeatsError, SweepOwnedError, UnusableFile) as exc:
        err.print(plain(f"graphsweep: {exc}"))
        return 2
    if spec.is_ingest:
        err.print(plain(f"graphsweep: {args.spec} ingests existing logs (key 'source'): nothing is submitted, so more "
                        "repeats have to be run by hand and ingested"))  # fmt: skip
        return 2
    if args.target_repeats is not None and not 1 <= args.target_repeats <= 100:
        err.print(f"graphsweep: --target-repeats {args.target_repeats}: give a number from 1 to 100", highlight=False)
        return 2
    if args.max_repeats < 2:
        err.print(f"graphsweep: --max-repeats {args.max_repeats}: give at least 2", highlight=False)
        return 2
    paths = SweepPaths(args.results, spec.name)
    comparison_path, runs_path = paths.comparison, paths.runs
    if not comparison_path.exists():
        err.print(plain(f"graphsweep: {comparison_path} does not exist: run the sweep first (snakemake --cores N "
                        f"--config spec={args.spec}) or pass --results"))  # fmt: skip
        return 2
    try:
        comparison = read_table(comparison_path, "comparison")
        runs = read_table(runs_path, "runs") if runs_path.exists() else None
        plans = plan_more_repeats(spec, comparison, runs, target_repeats=args.target_repeats, cap=args.max_repeats)
    except (RepeatsError, UnusableFile) as exc:
        err.print(plain(f"graphsweep: {exc}"))
        return 2
    console = _console()
    if not plans:
        console.print(plain(f"sweep {spec.name}: no inconclusive cell; nothing to add"))
        return 0
    table = Table("cell", "repeats now", "target", "new runs", "GPU-h", "why", title=plain(f"sweep {spec.name}: more repeats"))
    for p in plans:  # cell ids and the statistics' reasons are text, never markup
        table.add_row(plain(p.cell_id), str(p.have), str(p.target), str(len(p.new_runs)), f"{p.gpu_seconds / 3600:.4f}",
                      plain(p.why))  # fmt: skip
    console.print(table)
    todo = [p for p in plans if p.new_runs]
    n_runs = sum(len(p.new_runs) for p in todo)
    gpu_h = sum(p.gpu_seconds for p in todo) / 3600
    unit = "pair jobs" if spec.pairing else "runs"
    console.print(f"{n_runs} new {unit} for {len(todo)} inconclusive cell(s), about {gpu_h:.4f} GPU-hours")
    for p in todo:
        console.print(plain(f"  {p.cell_id}: {', '.join(p.new_runs)}"), highlight=False, soft_wrap=True)
    if not todo:
        return 0
    if args.dry_run:
        console.print("dry run: nothing written")
        return 0
    path = extra_repeats_path(args.results, spec.name)
    write_extra(path, spec.name, {p.cell_id: p.target for p in todo}, {p.cell_id: p.why for p in todo})
    console.print(plain(f"wrote {path}; run the workflow again (snakemake --cores N --config spec={args.spec}) to add them"),
                  soft_wrap=True)
    return 0
