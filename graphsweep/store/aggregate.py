"""Gather the per-run records of a sweep into runs.parquet and iterations.parquet.

Each run comes as its RunDir, built from the aggregate rule's declared inputs (run.json, summary.json,
iterations.parquet: records, never a log; what the log says is the parser's, in summary.json); every file is
validated as it is read (a damaged one is UnusableFile: the file, what is wrong, how to go on), and nothing is
written unless all of them are good.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from graphsweep import provenance
from graphsweep.store import schema
from graphsweep.store.tables import SUMMARY_NOT_COLUMNS, read_table, write_table
from graphsweep.store.readback import read_run_iterations
from graphsweep.store.runfiles import read_run_info, read_summary
from graphsweep.store.timeparts import time_columns
from graphsweep.layout import RunDir
from graphsweep.fileio import UnusableFile
from graphsweep.vocab import EAGER, PAIR


def run_row(plan_row: dict[str, Any], run: RunDir) -> dict[str, Any]:
    """One runs.parquet row: the plan's facts, run.json (job facts) and summary.json (what the log says)."""
    row = dict(plan_row)
    info = read_run_info(run)
    summary = read_summary(run, pair=plan_row.get("arm") == PAIR)
    for key in ("executor", "job_id", "host", "start_utc", "end_utc", "wall_s", "exit_code", "state", "attempt",
                "gpu_seconds", "slurm_nodelist"):  # fmt: skip
        row[key] = info.get(key)
    # the command the job ran (run.json), which differs from today's plan when the job ran under an older graphsweep
    row["command"] = info.get("command") or plan_row.get("command")
    row["previous_attempts"] = info.get("previous_attempts") or None  # kept as JSON text (store/schema.py)
    if "provenance_lines" not in summary:
        raise UnusableFile(run.summary, "lacks provenance_lines (parsed by a graphsweep that left the log's "
                           "provenance lines and iteration time stamps out of it)", "delete it and the sweep's other "
                           "summary.json files parsed then: the next snakemake parses those runs again from their "
                           "logs (no job is submitted)")
    # The job's provenance, with what the training process printed inside its container on top (versions).
    prov = provenance.merge(info.get("provenance"), summary["provenance_lines"])
    row["provenance"] = json.dumps(prov, sort_keys=True) if prov else None
    row.update(provenance.flatten(prov))
    row.update(summary)  # lists (files, notes) stay lists: store/schema.py gives each column its type
    row["log_path"] = str(run.log)
    return row


def pair_rows(plan_row: dict[str, Any], run: RunDir) -> list[dict[str, Any]]:
    """A pair job (graphsweep/workloads/paired.py) gives two runs.parquet rows, one per arm: same job_id, `pair_id` = the job."""
    job = run_row(plan_row, run)
    summary = read_summary(run, pair=True)
    rows = []
    for arm, facts in summary["arms"].items():
        row = {k: v for k, v in job.items() if k not in summary}  # the job's facts, not the job-level summary keys
        row.update(facts)
        # arm: the plan's name (eager | graph | control), not the parser's (which reads a control arm as eager)
        row.update(run_id=facts["run_id"], arm=arm, pair_id=plan_row["run_id"],
                   est_gpu_seconds=(plan_row.get("est_gpu_seconds") or 0.0) / 2)  # the job's estimate, one half per arm
        if arm == EAGER:
            row.update(variant=EAGER, impl="none", scope="")
        rows.append(row)
    return rows


def aggregate(plan_path: Path, runs: Sequence[RunDir], runs_out: Path, iterations_out: Path) -> pd.DataFrame:
    """runs.parquet and iterations.parquet from the plan and the runs' folders; written only when every file read."""
    table, iterations = gather(plan_path, runs)
    write_table(table, runs_out, "runs")
    write_table(iterations, iterations_out, "iterations")
    return table


def gather(plan_path: Path, runs: Sequence[RunDir]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, iterations) frames of the given runs, as runs.parquet and iterations.parquet hold them (the decision
    loop's looks judge them without writing the tables)."""
    plan = read_table(plan_path, "plan").set_index("run_id", drop=False)
    rows, frames = [], []
    for run in runs:
        if run.run_id not in plan.index:
            raise UnusableFile(plan_path, f"has no row for run {run.run_id}", "delete it: the next snakemake writes it "
                               "again from the spec")
        plan_row = plan.loc[run.run_id].to_dict()
        new = pair_rows(plan_row, run) if plan_row.get("arm") == PAIR else [run_row(plan_row, run)]
        it = read_run_iterations(run)
        for row in new:  # where its wall time went (from the summary's iteration stamps), then only columns
            row.update(time_columns(row, it))
            rows.append({k: v for k, v in row.items() if k not in SUMMARY_NOT_COLUMNS})
        if len(it):
            frames.append(it)
    # no run at all (every run blocked at plan time): still every declared column, so readers find run_id & co
    table = pd.DataFrame(rows) if rows else pd.DataFrame({c: pd.Series(dtype=object) for c in schema.RUNS})
    iterations = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"run_id": pd.Series(dtype=str)})
    return table, iterations
