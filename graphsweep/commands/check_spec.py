"""graphsweep check-spec FILE: validate a sweep spec and run the preflight rules on every cell, submitting nothing."""

from __future__ import annotations

import argparse
import json
import sys

from graphsweep.plan import dry_run_summary, plan_frame
from graphsweep.spec import SpecError, load_spec

NAME = "check-spec"
HELP = "validate a sweep spec and report the preflight verdict of every cell (submits nothing)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (YAML)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")


def run(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc), "file": exc.path, "key": exc.key, "value": exc.value}, default=str))
        else:
            print(f"graphsweep: invalid sweep spec: {exc}", file=sys.stderr)
        return 2
    plan = plan_frame(spec)
    blocked = plan[plan.status == "blocked"].drop_duplicates("cell_id")
    summary = dry_run_summary(plan)
    if args.json:
        violations = [
            {"cell_id": r.cell_id, "rule": r.rule_id, "message": r.rule_message, "source": r.rule_source}
            for r in blocked.itertuples()
        ]
        print(json.dumps({"ok": True, "sweep": spec.name, **summary, "cells": len(spec.cells()), "violations": violations}))
        return 0
    from graphsweep.commands import console as _console
    from rich.table import Table

    console = _console()
    console.print(
        f"[bold]{spec.name}[/]: {len(spec.shapes())} shapes x {len(spec.variants)} variants = {len(spec.cells())} cells, "
        f"{summary['runs']} runs ({summary['to_submit']} to submit, {summary['blocked']} blocked by preflight), "
        f"about {summary['gpu_hours']} GPU-hours"
    )
    if len(blocked):
        table = Table("cell", "rule", "message", title="Blocked by preflight (no job will be submitted)")
        for r in blocked.itertuples():
            table.add_row(r.cell_id, str(r.rule_id), str(r.rule_message))
        console.print(table)
    return 0
