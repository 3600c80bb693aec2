"""The pipeline's own cost per run against the training time of that run, from a finished sweep's results.

    python benchmarks/pipeline_overhead.py results/default                # the default sweep, here on the CPU
    python benchmarks/pipeline_overhead.py results/examples/h200-builtin  # the H200 sweep (issue 8), once it ran

Per run (run.json, iterations.parquet): time from submission to the job's start (submitit, queue), the job's
wall time, the training loop (the sum of the logged iteration times) and so the job's startup (interpreter,
imports, model build, and the process wrapper), and the time graphsweep's parser takes on the log (measured
here, now). Prints medians and totals; GPU-side time is the training loop's.
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
from graphsweep.vocab import RunDir


def _utc(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def run_costs(run_dir: Path) -> dict[str, float] | None:
    """One run's times in seconds, or None when it never ran (blocked by preflight)."""
    meta_path = RunDir(run_dir).run_json
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    submitted, start, end = (_utc(meta.get(k)) for k in ("submitted_utc", "start_utc", "end_utc"))
    if start is None or end is None:
        return None
    iters = RunDir(run_dir).iterations
    train_s = float(pd.read_parquet(iters, columns=["elapsed_ms"]).elapsed_ms.sum()) / 1e3 if iters.exists() else 0.0
    t0 = time.perf_counter()
    parse_run([RunDir(run_dir).log], arm="eager" if meta["run_id"].split(".")[1] == "eager" else "graph")
    parse_s = time.perf_counter() - t0
    job_s = float(meta.get("wall_s") or (end - start).total_seconds())
    return {
        "submit_to_start_s": (start - submitted).total_seconds() if submitted else float("nan"),
        "job_s": job_s,
        "train_loop_s": train_s,
        "startup_s": max(job_s - train_s, 0.0),
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
        overhead = t.job_s - t.train_loop_s + t.parse_s + t.submit_to_start_s.fillna(0)
        ratio = overhead / t.train_loop_s
        print(f"  per run with iterations: pipeline + startup {overhead.median():.2f} s against a "
              f"training loop of {t.train_loop_s.median():.2f} s (median ratio {ratio.median():.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
