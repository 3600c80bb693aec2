"""graphsweep status [SWEEP]: every run of a sweep by state, from its result files and ONE batched sacct call.

States: planned (not submitted yet), blocked (preflight), queued / running (a job in flight: Slurm's state, the
latest `iteration i/N` from the log tail), done (run.json written: the run's outcome and its cell's verdict once
compare has run), failed (an infrastructure failure the next `snakemake --profile slurm` retries, with its reason).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from rich.table import Table
from rich.text import Text

from graphsweep.commands import console as _console
from graphsweep.commands import fail, plain
from graphsweep.entry.gpu_busy import launch_bound
from graphsweep.judge import prose
from graphsweep.judge.centre import centre_ms
from graphsweep.parse.progress import latest_iteration
from graphsweep.plan.looks import read_look
from graphsweep.plan.planner import plan_frame, plan_sweep
from graphsweep.run.process import process_alive
from graphsweep.run.slurm import ALIVE_STATES, JobRecord, sacct
from graphsweep.run.submit import read_failure
from graphsweep.store.runfiles import read_job_side, read_run_info, read_summary
from graphsweep.records import JobSide
from graphsweep.store.tables import read_table
from graphsweep.sweepspec.load import load_spec
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile
from graphsweep.vocab import BLOCKED, EAGER, GRAPH

NAME = "status"
HELP = "show every run of a sweep: planned, queued, running (iteration i/N), done (verdict) or failed (reason)"

ORDER = ["running", "queued", "failed", "planned", "done", BLOCKED]


@dataclass(frozen=True)
class RunStatus:
    run_id: str
    cell_id: str
    arm: str
    state: str  # one of ORDER
    detail: str
    job_id: str = ""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "sweep",
        nargs="?",
        help="sweep name (results/NAME) or spec file; default: the spec in configs/config.yaml",
    )
    p.add_argument("--results", default="results", help="results folder (default: results)")
    p.add_argument("--json", action="store_true", help="print one JSON object per run instead of a table")


def _sweep_name(arg: str | None) -> tuple[str, Any]:
    """(sweep name, spec or None) from a name, a spec path, or configs/config.yaml."""
    if arg is None:
        try:
            arg = yaml.safe_load(Path("configs/config.yaml").read_text())["spec"]
        except (OSError, yaml.YAMLError, TypeError, KeyError) as exc:
            raise ValueError(f"configs/config.yaml names no spec ({type(exc).__name__}: {exc}); give a sweep "
                             "name or a spec file") from None
    if arg.endswith((".yaml", ".yml")) and Path(arg).is_file():
        spec = load_spec(arg)
        return spec.name, spec
    return arg, None


def _plan(paths: SweepPaths, spec: Any) -> pd.DataFrame:
    if paths.plan.exists():
        return asked(paths, read_table(paths.plan, "plan"))
    if spec is not None:
        return asked(paths, plan_frame(plan_sweep(spec)))
    runs = sorted(p.name for p in paths.run_dirs.glob("*") if p.is_dir())
    return pd.DataFrame({"run_id": runs, "cell_id": runs, "arm": "", "variant": "", "status": "submit"})


def asked(paths: SweepPaths, plan: pd.DataFrame) -> pd.DataFrame:
    """The runs the sweep has asked for so far: its first look's, those its decision loop's looks asked for
    (looks/look-*.json), and any that has a run folder; the rest of the loop's budget is not a run yet."""
    if "look" not in plan.columns:
        return plan
    wanted = set(plan.run_id[plan["look"] <= 1])
    for path in (paths.root / SweepPaths.LOOKS).glob("look-*.json"):
        wanted |= set(read_look(path).next_runs)
    wanted |= {p.name for p in paths.run_dirs.glob("*") if p.is_dir()}
    return plan[plan.run_id.isin(wanted)]


def _verdicts(paths: SweepPaths) -> dict[str, str]:
    if not paths.comparison.exists():
        return {}
    comp = read_table(paths.comparison, "comparison")  # a damaged one is said, never shown as "no verdict yet"
    return dict(zip(comp.cell_id, comp.verdict))


def collect(out: Path, plan: pd.DataFrame, query=sacct) -> tuple[list[RunStatus], str]:
    """Each run's status; sacct is called once for all jobs in flight. Returns (statuses, a note on sacct)."""
    paths = SweepPaths(out.parent, out.name)
    verdicts = _verdicts(paths)
    sides: dict[str, JobSide] = {}
    for run_id in plan.run_id:
        side = read_job_side(paths.jobs(run_id))
        if side and not paths.run_json(run_id).exists():
            sides[run_id] = side
    slurm_ids = [s.job_id for s in sides.values() if s.cluster == "slurm"]
    records: dict[str, JobRecord] = {}
    note = ""
    if slurm_ids:
        try:
            records = query(slurm_ids)
        except (OSError, subprocess.SubprocessError) as exc:
            note = f"sacct failed ({type(exc).__name__}: {exc}); in-flight states are unknown"
    statuses = []
    for row in plan.itertuples():
        run_id, cell_id, arm = row.run_id, row.cell_id, getattr(row, "arm", "")
        arm_label = arm if arm != GRAPH else f"{GRAPH} {row.variant}"
        run = read_run_info(paths.run(run_id)) if paths.run_json(run_id).exists() else None
        # what a run did beats what a plan here says of it: before plan.parquet is written the runs are planned from
        # the spec, whose executor may block on this machine a graph arm that the Slurm profile submitted
        if run is None and run_id not in sides and getattr(row, "status", "submit") == BLOCKED:
            statuses.append(RunStatus(run_id, cell_id, arm_label, BLOCKED, str(row.rule_message or row.rule_id)))
        elif run is not None:
            summary = read_summary(paths.run(run_id)) if paths.run_summary(run_id).exists() else {}
            outcome = summary.get("outcome") or f"exit {run.get('exit_code')} (not parsed yet)"
            detail = outcome
            if arm == GRAPH and cell_id in verdicts:
                detail += f"; cell verdict {verdicts[cell_id]}"
            elif arm == EAGER:
                detail += "; baseline"
                if summary.get("graph_ceiling"):  # the launch-boundness diagnostic, before any graph arm ran
                    detail += (f"; GPU busy {summary['gpu_busy_share']:.0%} of its step: a graph can win up to "
                               f"{summary['graph_ceiling']:.2f}x")
            statuses.append(RunStatus(run_id, cell_id, arm_label, "done", detail, str(run.get("job_id", ""))))
        elif run_id in sides:
            side = sides[run_id]
            job_id = side.job_id
            if side.cluster != "slurm":  # a local job is a process: is it still there (not after a Ctrl-C)?
                alive = process_alive(job_id, side.host, side.pid_start)
                if alive is False:
                    statuses.append(RunStatus(run_id, cell_id, arm_label, "failed",
                                              f"{side.cluster} job {job_id} is not running any more (its "
                                              "controller was stopped); the next snakemake submits it again", job_id))
                    continue
                it = latest_iteration(side.log)
                detail = f"{side.cluster} job" + (f", iteration {it[0]}/{it[1]}" if it else "")
                if alive is None:
                    detail += f" on {side.host} (cannot check from here)"
                statuses.append(RunStatus(run_id, cell_id, arm_label, "running", detail, job_id))
                continue
            rec = records.get(job_id)
            state = rec.state if rec else ("unknown" if note else "not in sacct yet")
            if rec and state == "PENDING":
                statuses.append(RunStatus(run_id, cell_id, arm_label, "queued", f"PENDING ({rec.reason})", job_id))
            elif rec and state in ALIVE_STATES:
                it = latest_iteration(side.log)
                where = f"iteration {it[0]}/{it[1]}" if it else "starting"
                statuses.append(RunStatus(run_id, cell_id, arm_label, "running", f"{state} {rec.elapsed}, {where}", job_id))
            elif rec:
                statuses.append(
                    RunStatus(run_id, cell_id, arm_label, "failed", f"{state} without a result; retried", job_id)
                )
            else:
                statuses.append(RunStatus(run_id, cell_id, arm_label, "queued", state, job_id))
        else:
            failure = read_failure(paths.jobs(run_id))
            if failure:
                detail = f"{failure.get('message', failure.get('state'))} (attempt {failure.get('attempt')})"
                statuses.append(RunStatus(run_id, cell_id, arm_label, "failed", detail, str(failure.get("job_id", ""))))
            else:
                statuses.append(RunStatus(run_id, cell_id, arm_label, "planned", "", ""))
    return statuses, note


def run(args: argparse.Namespace) -> int:
    try:
        name, spec = _sweep_name(args.sweep)
    except Exception as exc:  # noqa: BLE001 - a bad spec is a user error: say it
        return fail(NAME, f"cannot read the sweep: {exc}")
    paths = SweepPaths(args.results, name)
    out = paths.root
    if spec is None and ("/" in name or name.endswith((".yaml", ".yml"))):
        return fail(NAME, f"{name}: no such spec file (give a spec file or a sweep name)")
    if spec is None and not out.exists():
        return fail(NAME, f"no results for sweep '{name}' in {out} (give a sweep name or spec file)")
    try:
        statuses, note = collect(out, _plan(paths, spec))
    except UnusableFile as exc:
        return fail(NAME, str(exc))
    if args.json:
        for s in statuses:
            print(json.dumps(s.__dict__))
        return 0
    statuses.sort(key=lambda s: (ORDER.index(s.state), s.cell_id, s.run_id))
    styles = {"running": "cyan", "queued": "blue", "failed": "red", "planned": "dim", "done": "green", BLOCKED: "yellow"}
    table = Table("state", "cell", "arm", "run", "job", "detail", title=plain(f"sweep {name} ({out})"))
    for s in statuses:  # every cell is user text (ids, paths, Megatron messages): never read as markup
        table.add_row(Text(s.state, style=styles[s.state]), *map(plain, (s.cell_id, s.arm, s.run_id, s.job_id, s.detail)))
    console = _console()
    console.print(table)
    counts = {state: sum(s.state == state for s in statuses) for state in ORDER}
    console.print(", ".join(f"{n} {state}" for state, n in counts.items() if n) or "no runs")
    for line in launch_lines(paths, _plan(paths, spec)):
        console.print(plain(line), soft_wrap=True)
    if note:
        console.print(Text(note, style="red"))
    return 0


def launch_lines(paths: SweepPaths, plan: pd.DataFrame) -> list[str]:
    """Per shape, from its finished eager runs alone: how busy the GPU is and what a graph can still win (known as
    soon as the eager arm ran, before any graph arm did)."""
    out = []
    for shape_id, rows in plan[plan.arm == EAGER].groupby("shape_id", sort=False):
        found = [read_summary(paths.run(r)) for r in rows.run_id if paths.run_summary(r).exists()]
        busy = [f["gpu_busy_ms"] for f in found if f.get("gpu_busy_ms") and f.get("step_ms_median")]
        step = [f["step_ms_median"] for f in found if f.get("gpu_busy_ms") and f.get("step_ms_median")]
        if busy:
            b, e = float(pd.Series(busy).median()), centre_ms(step)  # the eager step the report prints
            share, ceiling = launch_bound(b, e)
            row = {"gpu_busy_share": share, "graph_ceiling": ceiling, "eager_gpu_busy_ms": b, "eager_step_ms": e}
            out.append(f"shape {shape_id} ({len(busy)} eager run(s)): {prose.launch(row)}")
    return out
