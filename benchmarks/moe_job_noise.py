"""Job-to-job noise of the 128-expert MoE's eager-like runs (eager and A/A control: the same command) on its two
H200 sweeps: the 2026-12-02 one (Python's default garbage collector, no CPU pinning, 3 repeats) and the 2026-12-04 one
(quiet jobs: train.manual_gc and the rank pinned, 6 repeats through the decision loop). Per sweep: the runs, the
range of their steady medians, the sd of the log medians (the judge's unit of noise) and the median within-run
spread (the steady window's coefficient of variation, iteration to iteration). The paired 2026-12-04 sweep (each
job runs eager, graph, graph, eager or the reverse as four training processes: `pairing: true`) adds a second table:
per arm, how far its two processes inside one job lie apart against how far all its processes lie apart, which
says whether the noise belongs to the job (the host, the GPU: pairing cancels it) or to the process (it does not).

    .venv/bin/python benchmarks/moe_job_noise.py
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = {"2026-12-02, default GC, not pinned": ROOT / "benchmarks/data/h200-moe-128e-sweep-a",
          "2026-12-04, manual GC, pinned": ROOT / "results/examples/megatron-moe-128e",
          "2026-12-04 paired, manual GC, pinned": ROOT / "results/examples/megatron-moe-128e-paired"}
PAIRED = SWEEPS["2026-12-04 paired, manual GC, pinned"]


def main() -> int:
    print("| sweep | eager-like runs | steady medians ms | sd of log medians | within-run CV (median) | graph runs: sd of "
          "log medians around each variant's mean |")
    print("|---|---:|---|---:|---:|---:|")
    for name, folder in SWEEPS.items():
        runs = pd.read_parquet(folder / "runs.parquet")
        runs = runs[runs.outcome == "completed"]
        eager = runs[runs.variant.isin(["eager", "aa"])]
        logs = [math.log(x) for x in eager.step_ms_median]
        it = pd.read_parquet(folder / "iterations.parquet")
        if "segment" in it.columns and it.segment.notna().any():  # a pair job's arm is two processes: each its own
            windows = [ms for _, ms in it[it.run_id.isin(eager.run_id) & it.steady].groupby(["run_id", "segment"]).elapsed_ms]
        else:
            windows = [it[(it.run_id == rid) & it.iteration.between(first, last)].elapsed_ms
                       for rid, first, last in zip(eager.run_id, eager.steady_first, eager.steady_last)]
        cvs = [ms.std() / ms.mean() for ms in windows if len(ms) > 1]
        graph = runs[~runs.variant.isin(["eager", "aa"])]
        resid = [math.log(x) - statistics.mean(math.log(y) for y in g.step_ms_median)
                 for _, g in graph.groupby("variant") for x in g.step_ms_median]
        dof = len(resid) - graph.variant.nunique()
        sd_graph = math.sqrt(sum(r * r for r in resid) / dof) if dof > 0 else float("nan")
        print(f"| {name} | {len(eager)} | {eager.step_ms_median.min():.1f}-{eager.step_ms_median.max():.1f} | "
              f"{statistics.stdev(logs):.3f} | {statistics.median(cvs):.1%} | {sd_graph:.3f} |")
    print()
    segments(PAIRED)
    return 0


def segments(folder: Path) -> None:
    """Per arm of a paired sweep: its processes' steady medians, within a job and across the jobs."""
    it = pd.read_parquet(folder / "iterations.parquet")
    runs = pd.read_parquet(folder / "runs.parquet")
    med = it[it.steady].groupby(["run_id", "segment"]).elapsed_ms.median().rename("ms").reset_index()
    med = med.merge(runs[["run_id", "arm", "pair_id"]], on="run_id")
    print("| arm | processes | steady medians ms | within one job: sd of log(first / second process) / sqrt 2 | "
          "across all its processes: sd of log medians | the two processes of a job, log apart |")
    print("|---|---:|---|---:|---:|---|")
    for arm, g in med.groupby("arm"):
        apart = [math.log(p.ms.iloc[0] / p.ms.iloc[1]) for _, p in g.sort_values("segment").groupby("pair_id")
                 if len(p) == 2]
        within = statistics.stdev(apart) / math.sqrt(2)
        across = statistics.stdev(math.log(x) for x in g.ms)
        print(f"| {arm} | {len(g)} | {g.ms.min():.1f}-{g.ms.max():.1f} | {within:.3f} | {across:.3f} | "
              f"{', '.join(f'{abs(a):.3f}' for a in apart)} |")
    arms = runs.pivot(index="pair_id", columns="arm", values="step_ms_median")  # each arm's median over its processes
    ratios = [math.log(e / g) for e, g in zip(arms.eager, arms.graph)]
    print(f"\nper pair job, log(eager / graph): {', '.join(f'{r:.3f}' for r in ratios)}; sd {statistics.stdev(ratios):.3f} "
          f"(the eager arms' own sd of log medians: {statistics.stdev(math.log(e) for e in arms.eager):.3f})")


if __name__ == "__main__":
    raise SystemExit(main())
