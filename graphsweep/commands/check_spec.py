"""graphsweep check-spec FILE: validate a sweep spec and run the preflight rules on every cell, submitting nothing."""

from __future__ import annotations

import argparse
import json

from rich.table import Table
from rich.text import Text

from graphsweep.commands import cluster_choices
from graphsweep.commands import console as _console
from graphsweep.commands import plain, say
from graphsweep.plan.planner import NothingToMeasure, PlannedRun, dry_run_summary
from graphsweep.plan.repeats import RepeatsError
from graphsweep.plan.sweep_plan import plan_for
from graphsweep.records import SpecError
from graphsweep.workloads import bridge_keys
from graphsweep.workloads.megatron_bridge import KIND as MEGATRON_BRIDGE

NAME = "check-spec"
HELP = "validate a sweep spec and report the preflight verdict of every cell (submits nothing)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (YAML)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    p.add_argument("--results", default="results",
                   help="results folder: its extra_repeats.yaml for this sweep is checked too (default: results)")
    p.add_argument("--cluster", choices=cluster_choices(),
                   help="the executor the workflow runs with (its --config cluster=); default: the spec's executor.cluster")


def run(args: argparse.Namespace) -> int:
    nothing: NothingToMeasure | None = None
    try:
        sweep = plan_for(args.spec, args.results, args.cluster)  # the workflow's own plan (plan/sweep_plan.py)
        spec, planned, spent = sweep.spec, sweep.planned, sweep.spent
    except NothingToMeasure as exc:  # planned, but no cell can give a verdict: show each cell's rule, then refuse
        nothing, spec, planned, spent = exc, exc.spec, exc.planned, {}
    except (SpecError, RepeatsError) as exc:
        _refuse(exc, args.json)
        return 2
    first: dict[str, PlannedRun] = {}
    for p in planned:
        if not p.submitted:
            first.setdefault(p.run.cell_id, p)  # one row per blocked cell
    blocked = list(first.values())
    summary = dry_run_summary(planned, spent)
    if args.json:
        violations = [
            {"cell_id": p.run.cell_id, "rule": ";".join(v.rule for v in p.violations),
             "message": " | ".join(v.message for v in p.violations), "source": " | ".join(v.source for v in p.violations)}
            for p in blocked
        ]
        result = {"ok": nothing is None, "sweep": spec.name, **summary, "cells": len(spec.cells()),
                  "violations": violations}
        if spec.workload["kind"] == MEGATRON_BRIDGE:
            result["keys_checked"] = bridge_keys.what_was_checked(spec.raw)
        if nothing is not None:
            result.update(error=str(nothing), file=nothing.path, key=nothing.key, value=nothing.value)
        print(json.dumps(result, default=str))
        return 0 if nothing is None else 2
    console = _console()
    console.print(Text.assemble(
        (spec.name, "bold"),
        f": {len(spec.shapes())} shapes x {len(spec.variants)} variants = {len(spec.cells())} cells, "
        f"{summary['runs']} runs ({summary['to_submit']} to submit, {summary['blocked']} blocked by preflight), "
        f"about {summary['gpu_hours']} GPU-hours (budget_gpu_hours {spec.budget_gpu_hours}): "
        f"{summary['estimate']}",
    ))  # fmt: skip
    if spec.workload["kind"] == MEGATRON_BRIDGE:  # which release the keys were checked against, if any
        console.print(Text(bridge_keys.what_was_checked(spec.raw)))
    if blocked:
        table = Table("cell", "rule", "message", title="Blocked by preflight (no job will be submitted)")
        for p in blocked:  # cell ids and Megatron's messages are text, never markup
            table.add_row(plain(p.run.cell_id), plain(";".join(v.rule for v in p.violations)),
                          plain(" | ".join(v.message for v in p.violations)))
        console.print(table)
    if nothing is not None:
        _refuse(nothing, False)
        return 2
    return 0


def _refuse(exc: SpecError | RepeatsError, as_json: bool) -> None:
    if as_json:
        where = {"file": exc.path, "key": exc.key, "value": exc.value} if isinstance(exc, SpecError) else {}
        print(json.dumps({"ok": False, "error": str(exc), **where}, default=str))
    else:
        say(f"graphsweep: invalid sweep spec: {' '.join(str(exc).split())}", err=True)
