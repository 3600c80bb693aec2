"""graphsweep plan [--dry-run] SPEC: the runs a sweep will submit, the blocked ones, and the GPU-hours requested."""

from __future__ import annotations

import argparse

from rich.table import Table

from graphsweep.commands import cluster_choices
from graphsweep.commands import console as _console
from graphsweep.commands import fail, output_file_problem, plain, say
from graphsweep.plan.owner import SweepOwnedError, claim
from graphsweep.plan.planner import dry_run_summary, plan_frame, write_plan
from graphsweep.plan.repeats import RepeatsError
from graphsweep.plan.sweep_plan import plan_for
from graphsweep.fileio import UnusableFile
from graphsweep.records import SpecError
from graphsweep.vocab import GRAPH, NO_GRAPH, PAIR

NAME = "plan"
HELP = "list every run of a sweep with its command, preflight verdict and GPU-hours (--dry-run writes nothing)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (YAML)")
    p.add_argument("--dry-run", action="store_true", help="only print; write no plan.parquet")
    p.add_argument("--out", help="where to write plan.parquet (default RESULTS/{sweep}/plan.parquet)")
    p.add_argument("--results", default="results",
                   help="results folder of the workflow: its extra_repeats.yaml and finished runs count (default: results)")
    p.add_argument("--cluster", choices=cluster_choices(),
                   help="the executor the workflow runs with (its --config cluster=; the Slurm profile's is slurm); "
                        "default: the spec's executor.cluster")
    p.add_argument("--commands", action="store_true", help="also print the exact command of every run")


def _pair_label(row) -> str:
    """A pair job runs both arms in one job (spec `pairing: true`, graphsweep/workloads/paired.py)."""
    other = "eager (A/A)" if row.impl == NO_GRAPH else f"graph {row.variant}"
    return f"pair: eager + {other}, ABBA"


def run(args: argparse.Namespace) -> int:
    try:  # the workflow's own plan (graphsweep/plan/sweep_plan.py): the same rows as its plan.parquet
        sweep = plan_for(args.spec, args.results, args.cluster)
    except (SpecError, RepeatsError) as exc:
        say(f"graphsweep: invalid sweep spec: {exc}", err=True)
        return 2
    spec, planned, spent = sweep.spec, sweep.planned, sweep.spent
    out = args.out or str(sweep.paths.plan)
    if not args.dry_run and (problem := output_file_problem(out)):
        return fail(NAME, f"--out: {problem}")
    if not args.dry_run and not args.out:  # results/{sweep} is this spec's, never another's (plan/owner.py)
        try:
            claim(sweep.paths, spec)
        except (SweepOwnedError, UnusableFile) as exc:
            return fail(NAME, str(exc))
    df = plan_frame(planned)
    table = Table("cell", "arm", "runs", "status", "GPU-h", "reason", title=plain(f"sweep {spec.name}"))
    for (cell_id, arm), g in df.groupby(["cell_id", "arm"], sort=False):
        first = g.iloc[0]
        table.add_row(
            plain(cell_id),
            plain(f"{GRAPH} {first.variant}" if arm == GRAPH else (_pair_label(first) if arm == PAIR else arm)),
            str(len(g)),
            first.status,
            f"{g.est_gpu_seconds.sum() / 3600:.3f}",
            plain(first.rule_message),
        )
    console = _console()
    console.print(table)
    s = dry_run_summary(planned, spent)
    console.print(
        f"{s['runs']} {'pair jobs (each runs both arms, ABBA)' if spec.pairing else 'runs'}: {s['to_submit']} to submit, {s['blocked']} blocked by preflight (cost 0 GPU-s); "
        f"requested about {s['gpu_hours']} GPU-hours ({s['estimate']})"
    )
    if args.commands:
        # exactly plan.parquet's `command`, byte for byte: plain print, so no markup, wrapping, tab expansion or
        # control-code stripping of rich can change a character of what the job runs
        for r in df.itertuples():
            print(f"{r.run_id}: {r.command}", flush=True)
    if not args.dry_run:
        try:
            write_plan(spec, planned, out)
        except OSError as exc:  # the folder went away or filled up after the look above
            return fail(NAME, f"--out {out}: cannot write it: {exc.strerror or exc}")
        console.print(plain(f"wrote {out}"))
    return 0
