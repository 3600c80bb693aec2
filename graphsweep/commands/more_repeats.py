"""graphsweep more-repeats SPEC [--max-repeats N] [--results DIR] [--dry-run]: let the decision loop go on.

The workflow's decision loop (plan/decide.py) stops adding repeats at the spec's decide.max_repeats. For the cells it
left undecided there (comparison.parquet loop_status `budget`), this raises the budget for the sweep's results
folder (results/{sweep}/extra_repeats.yaml) to what the loop estimates decides them (or --max-repeats), lists the
runs that may follow and their GPU-hours, and prints the one command that continues: the next `snakemake` takes the
looks on where they stopped, on the same boundaries. For an ingested sweep nothing is submitted from here: it prints
the commands of the repeats to run where the logs came from.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess

from rich.table import Table

from graphsweep.commands import console as _console
from graphsweep.commands import plain
from graphsweep.fileio import UnusableFile
from graphsweep.layout import SweepPaths
from graphsweep.plan import repeats as rp
from graphsweep.plan.cost import spent_of
from graphsweep.plan.decide import budget_hours
from graphsweep.plan.owner import SweepOwnedError, check_owner
from graphsweep.plan.planner import plan_sweep
from graphsweep.records import SpecError
from graphsweep.store.tables import read_table
from graphsweep.sweepspec.load import load_spec
from graphsweep.sweepspec.sweep import Spec

NAME = "more-repeats"
HELP = "raise the decision loop's budget for the cells it left undecided; prints the command that continues"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (YAML)")
    p.add_argument("--max-repeats", type=int, default=None, metavar="N",
                   help="the budget in jobs per arm (default: what the loop estimates decides the undecided cells, "
                        "at most the spec's decide.horizon)")
    p.add_argument("--results", default="results", help="results folder of the workflow (default: results)")
    p.add_argument("--dry-run", action="store_true", help="print what would be added; write nothing")
    p.add_argument("--run", action="store_true",
                   help="then run the workflow command that continues the loop (the command the report names)")


def continue_command(spec: Spec, results: str) -> str:
    """The workflow command that takes the loop on (the local executor's; a Slurm sweep: --profile slurm)."""
    where = ["--profile", "slurm"] if spec.executor.cluster == "slurm" else ["--cores", "all"]
    return shlex.join(["snakemake", *where, "--config", f"spec={spec.path}", f"results={results}"])


def run(args: argparse.Namespace) -> int:
    err = _console(stderr=True)
    console = _console()
    try:
        spec = load_spec(args.spec)
        paths = SweepPaths(args.results, spec.name)
        check_owner(paths, spec)  # the budget goes to this spec's own sweep only
        spec = rp.apply_raise(spec, args.results)
    except (SpecError, rp.RepeatsError, SweepOwnedError, UnusableFile) as exc:
        err.print(plain(f"graphsweep: {exc}"))
        return 2
    if args.max_repeats is not None and not 1 <= args.max_repeats <= spec.decide.horizon:
        err.print(plain(f"graphsweep: --max-repeats {args.max_repeats}: give 1 to {spec.decide.horizon} (the spec's "
                        f"decide.horizon, where the looks' boundaries end)"))
        return 2
    if not spec.decide.enabled:
        err.print(plain(f"graphsweep: {spec.path}: key 'decide.enabled' = false: the sweep is judged once, with no "
                        "loop to continue; set decide.enabled: true (its first look keeps every finished run)"))
        return 2
    if not paths.comparison.exists():
        console.print(plain(f"sweep {spec.name}: no comparison in {paths.root} yet: the workflow's first run takes "
                            f"the first look ({spec.repeats} jobs per arm) and the loop's rounds up to "
                            f"{spec.decide.max_repeats} jobs per arm: {continue_command(spec, args.results)}"),
                      soft_wrap=True)
        return 0
    try:
        needs = rp.undecided(read_table(paths.comparison, "comparison"))
    except UnusableFile as exc:
        err.print(plain(f"graphsweep: {exc}"))
        return 2
    if not needs:
        console.print(plain(f"sweep {spec.name}: no cell is undecided for want of repeats; nothing to add"))
        return 0
    table = Table("cell", "verdict", "jobs per arm", "to decide", "GPU-h more", title=plain(f"sweep {spec.name}: "
                  "undecided cells"))
    for n in needs:
        table.add_row(plain(n.cell_id), plain(n.verdict), str(n.have), str(n.need or "beyond the horizon"),
                      f"{n.gpu_hours:.3f}" if n.gpu_hours is not None else "")
    console.print(table)
    target = args.max_repeats or rp.target_for(needs, spec.decide.horizon)
    now = spec.decide.max_repeats
    if target is None or target <= now and not spec.is_ingest:
        console.print(plain(f"the loop's budget is {now} jobs per arm already; the estimates ask for no more (give "
                            "--max-repeats to go on anyway)"))
        return 0
    planned = plan_sweep(spec.with_max_repeats(target) if not spec.is_ingest else _ingest_to(spec, target))
    have = max(n.have for n in needs)
    added = rp.new_runs(planned, have, target, [n.cell_id for n in needs])
    spent = spent_of(paths)  # what the finished runs took: prices the added ones, and the budget left
    hours = rp.hours(added, planned, spent)
    if spec.is_ingest:
        console.print(plain(f"{args.spec} ingests existing logs: run these {len(added)} jobs where the logs came from "
                            f"(about {hours:.3f} GPU-hours), add their logs to the source folder under the same "
                            "pattern, and run snakemake again:"), soft_wrap=True)
        for p in added:
            console.print(plain(f"  {p.run.run_id}: {p.launch.shell()}"), soft_wrap=True, highlight=False)
        return 0
    console.print(plain(f"budget {now} -> {target} jobs per arm: at most {len(added)} more runs, about {hours:.3f} "
                        "GPU-hours (the loop stops each cell as soon as it is decided)"), soft_wrap=True)
    cap = budget_hours(spec.raw, spec.decide.to_dict())
    left = cap - sum(spent.values()) / 3600.0
    if hours > left:  # the other budget stops the loop first: say so before anyone counts on the repeats
        key = "decide.gpu_hours" if spec.decide.gpu_hours is not None else "budget_gpu_hours"
        console.print(plain(f"but {key} ({cap:g} GPU-hours for the whole sweep, {max(left, 0.0):.3f} left) stops the "
                            f"loop first: raise it in {spec.path} to let the loop go on to {target} jobs per arm"),
                      soft_wrap=True)
    if args.dry_run:
        console.print(plain(f"dry run: nothing written; without --dry-run, then: {continue_command(spec, args.results)}"),
                      soft_wrap=True)
        return 0
    why = ", ".join(f"{n.cell_id} needs about {n.need}" for n in needs if n.need)
    rp.write_raise(paths.extra_repeats, spec.name, target, why or "more-repeats --max-repeats")
    command = continue_command(spec, args.results)
    if not args.run:
        console.print(plain(f"wrote {paths.extra_repeats}; continue with: {command}"), soft_wrap=True)
        return 0
    console.print(plain(f"wrote {paths.extra_repeats}; running: {command}"), soft_wrap=True)
    try:  # the workflow's own command line, its output straight to this terminal
        return subprocess.run(shlex.split(command), check=False).returncode
    except FileNotFoundError:
        err.print(plain(f"graphsweep: snakemake is not on PATH here: run {command} where the workflow runs"))
        return 2


def _ingest_to(spec: Spec, repeats: int) -> Spec:
    """An ingested sweep planned to `repeats` (the commands of the repeats it lacks)."""
    raw = dict(spec.raw)
    raw["repeats"] = repeats
    raw.pop("source", None)
    return Spec(spec.path, raw)
