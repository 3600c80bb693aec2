"""The files of one run directory, and turning them into iterations.parquet + summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from graphsweep import parse
from graphsweep.tables import write_table


def log_files(run_dir: Path) -> list[Path]:
    """The run's full log plus any per-rank logs (multi-process launches write ranks/<n>.log)."""
    files = [run_dir / "log.txt"]
    files += sorted((run_dir / "ranks").glob("*.log")) if (run_dir / "ranks").is_dir() else []
    return [f for f in files if f.exists()]


def parse_run_dir(run_dir: Path, iterations_out: Path, summary_out: Path) -> parse.RunSummary:
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    info = json.loads((run_dir / "run.json").read_text())
    run = cfg["run"]
    arm = "graph" if run["arm"] == "graph" else "eager"
    parsed = parse.parse_run(log_files(run_dir), arm=arm, warmup=int(run["warmup"]), run_info=info, run_id=run["run_id"])
    write_table(parsed.iterations, iterations_out, "iterations")
    summary = parse.summary_to_dict(parsed.summary)
    tmp = summary_out.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    tmp.replace(summary_out)
    return parsed.summary
