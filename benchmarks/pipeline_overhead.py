"""The pipeline's own cost per run against the training time of that run, from a finished sweep's results.

    python benchmarks/pipeline_overhead.py results/default                # the default sweep, here on the CPU
    python benchmarks/pipeline_overhead.py results/examples/h200-builtin  # the H200 sweep (issue 8), once it ran

Per run (run.json, summary.json, iterations.parquet): time from submission to the job's start (submitit, queue), the
job's wall time, the training loop (the sum of the logged iteration times), the rest of the job (job - loop) and
how it splits into start-up (interpreter, imports, model build, the process wrapper: to the first iteration's time
stamp) and teardown (graphsweep.store.timeparts, the runs.parquet time_* columns), and the time graphsweep's parser
takes on the log (measured here, now). Prints medians and totals; GPU-side time is the training loop's. Then,
from runs.parquet, where the sweep's GPU-hours went (the report's section of that name).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

from graphsweep.parse.run import parse_run
from graphsweep.report import words
from graphsweep.report.gpu_time import gpu_time
from graphsweep.store.tables import read_table
from graphsweep.store.timeparts import folder_parts, time_parts
from graphsweep.layout import RunDir


def _utc(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def run_costs(run_dir: Path) -> dict[str, float] | None:
    """One job's times in seconds, or None when it never ran (blocked by preflight). Where its wall time went is
    graphsweep.store.timeparts's (the runs.parquet time_* columns): from the folder's parse output (a pair job: its
    two arms summed), or for a folder the workflow did not parse (a run kept as a rule's evidence) from the log
    parsed here."""
    meta_path = RunDir(run_dir).run_json
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    submitted, start, end = (_utc(meta.get(k)) for k in ("submitted_utc", "start_utc", "end_utc"))
    if start is None or end is None:
        return None
    t0 = time.perf_counter()
    arm = "eager" if meta["run_id"].split(".")[1] == "eager" else "graph"
    parsed = parse_run([RunDir(run_dir).log], arm=arm, run_id=meta["run_id"])
    parse_s = time.perf_counter() - t0
    if (run_dir / "summary.json").exists():
        parts = list(folder_parts(run_dir).values())
    else:
        parts = [time_parts({**meta, **parsed.summary.to_dict()}, parsed.iterations)]

    def total(name: str) -> float:
        values = [getattr(p, name) for p in parts]
        return float("nan") if any(v is None for v in values) else float(sum(values))

    return {
        "submit_to_start_s": (start - submitted).total_seconds() if submitted else float("nan"),
        "job_s": float(meta.get("wall_s") or (end - start).total_seconds()),
        "train_loop_s": sum(total(k) for k in ("warmup", "steady", "after")),
        "outside_loop_s": total("outside"),  # job - loop: start-up + teardown
        "startup_s": total("startup"),
        "teardown_s": total("teardown"),
        "parse_s": parse_s,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep_dir", type=Path, help="results/<sweep> of a finished sweep")
    args = ap.parse_args(argv)
    runs = sorted((args.sweep_dir / "runs").glob("*"))
    costs = {r.name: c for r in runs if (c := run_costs(r)) is not None}
    if not costs:
        print(f"no finished runs under {args.sweep_dir / 'runs'}", file=sys.stderr)
        return 2
    trained = {k: c for k, c in costs.items() if c["train_loop_s"] > 0}
    frame = pd.DataFrame(costs.values())
    print(f"{args.sweep_dir}: {len(costs)} runs ran, {len(trained)} logged iterations")
    for col in frame.columns:
        s = frame[col].dropna()
        print(f"  {col:<18} median {statistics.median(s):8.3f} s   total {s.sum():9.2f} s")
    if trained:
        t = pd.DataFrame(trained.values())
        overhead = t.outside_loop_s + t.parse_s + t.submit_to_start_s.fillna(0)
        ratio = overhead / t.train_loop_s
        print(f"  per run with iterations: pipeline + start-up + teardown {overhead.median():.2f} s against a "
              f"training loop of {t.train_loop_s.median():.2f} s (median ratio {ratio.median():.2f}x)")
    if (args.sweep_dir / "runs.parquet").exists():  # the sweep's breakdown, as its report has it
        g = gpu_time(read_table(args.sweep_dir / "runs.parquet", "runs"))
        for part, h, n in g.parts:
            print(f"  {words.gpu_part(part, n):<78} {h:7.3f} GPU-h  {words.share(h, g.total_h)}")
        print("  " + " ".join(words.gpu_time_sentences(g)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
