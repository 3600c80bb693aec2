"""graphsweep plan [--dry-run] SPEC: the runs a sweep will submit, the blocked ones, and the GPU-hours requested."""

from __future__ import annotations

import argparse
import sys

from graphsweep.plan import dry_run_summary, plan_frame, write_plan
from graphsweep.spec import SpecError, load_spec

NAME = "plan"
HELP = "list every run of a sweep with its command, preflight verdict and GPU-hours (--dry-run writes nothing)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (YAML)")
    p.add_argument("--dry-run", action="store_true", help="only print; write no plan.parquet")
    p.add_argument("--out", help="where to write plan.parquet (default results/{sweep}/plan.parquet)")
    p.add_argument("--commands", action="store_true", help="also print the exact command of every run")


def _pair_label(row) -> str:
    """A pair job runs both arms in one job (spec `pairing: true`, graphsweep/abba.py)."""
    other = "eager (A/A)" if row.impl == "none" else f"graph {row.variant}"
    return f"pair: eager + {other}, ABBA"


def run(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        print(f"graphsweep: invalid sweep spec: {exc}", file=sys.stderr)
        return 2
    df = plan_frame(spec)
    from graphsweep.commands import console as _console
    from rich.table import Table

    table = Table("cell", "arm", "runs", "status", "GPU-h", "reason", title=f"sweep {spec.name}")
    for (cell_id, arm), g in df.groupby(["cell_id", "arm"], sort=False):
        first = g.iloc[0]
        table.add_row(
            cell_id,
            f"graph {first.variant}" if arm == "graph" else (_pair_label(first) if arm == "pair" else arm),
            str(len(g)),
            first.status,
            f"{g.est_gpu_seconds.sum() / 3600:.3f}",
            str(first.rule_message or ""),
        )
    console = _console()
    console.print(table)
    s = dry_run_summary(df)
    console.print(
        f"{s['runs']} {'pair jobs (each runs both arms, ABBA)' if spec.pairing else 'runs'}: {s['to_submit']} to submit, {s['blocked']} blocked by preflight (cost 0 GPU-s); "
        f"requested about {s['gpu_hours']} GPU-hours"
    )
    if args.commands:
        for r in df.itertuples():
            console.print(f"[dim]{r.run_id}[/]: {r.command}", soft_wrap=True, highlight=False)
    if not args.dry_run:
        out = args.out or f"results/{spec.name}/plan.parquet"
        write_plan(spec, out)
        console.print(f"wrote {out}")
    return 0
