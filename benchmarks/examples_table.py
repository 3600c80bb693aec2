"""Print the verdict and cost tables of the committed H200 example sweeps (results/examples/), as docs/results-h200.md
quotes them: every figure there comes from this command (after tools/rederive_examples.sh).

    .venv/bin/python benchmarks/examples_table.py                  # all four sweeps
    .venv/bin/python benchmarks/examples_table.py h200-builtin
    .venv/bin/python benchmarks/examples_table.py --results /tmp/rx  # a re-derivation elsewhere
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from graphsweep.layout import SweepPaths
from graphsweep.store.timeparts import planned_run_ids

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "results" / "examples"
SWEEPS = ("h200-builtin", "megatron-tiny-vanilla-gpt", "megatron-tiny-moe", "megatron-1b-dense", "megatron-moe-128e",
          "megatron-moe-128e-padded", "megatron-moe-128e-paired")


def _f(x: object, spec: str) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _n(x: object) -> int:
    return 0 if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)  # type: ignore[arg-type]


def verdicts(sweep: str) -> str:
    cmp = pd.read_parquet(EXAMPLES / sweep / "comparison.parquet")
    lines = ["| cell | verdict | speedup [interval] | eager ms | graph ms | jobs | Δ mem GB (figure) | loss parity |",
             "|---|---|---|---|---|---|---|---|"]
    for r in cmp.itertuples():
        iv = f"{_f(r.speedup, '.2f')}x [{_f(r.ci_low, '.2f')}, {_f(r.ci_high, '.2f')}]" if pd.notna(r.speedup) else "—"
        mem = f"{_f(r.mem_delta_gb, '+.3f')} ({r.mem_metric})" if pd.notna(r.mem_delta_gb) else "—"
        lines.append(f"| {r.cell_id} | {r.verdict} | {iv} | {_f(r.eager_step_ms, '.2f')} | {_f(r.graph_step_ms, '.2f')} "
                     f"| {_n(r.n_eager)}+{_n(r.n_graph)} | {mem} | {r.loss_parity if isinstance(r.loss_parity, str) else '—'} |")
    return "\n".join(lines)


def runs(sweep: str) -> str:
    r = pd.read_parquet(EXAMPLES / sweep / "runs.parquet")
    jobs = planned_run_ids(r).unique()  # a pair job's two arms share its folder and run.json: each job's wall once
    walls = [json.loads(SweepPaths(EXAMPLES, sweep).run_json(job).read_text()).get("wall_s") for job in jobs]
    walls = pd.Series([w for w in walls if w is not None], dtype=float)
    gpus = ", ".join(sorted(set(r.prov_gpu_name.dropna())))
    cap = r.capture_s.dropna()
    excess = r.capture_iteration_excess_s.dropna() if "capture_iteration_excess_s" in r.columns else pd.Series([])
    out = [f"{len(r)} runs on {gpus or 'unknown GPUs'}; outcomes {({k: int(v) for k, v in r.outcome.value_counts().items()})}",
           f"job wall per job: median {walls.median():.1f} s (min {walls.min():.1f}, max {walls.max():.1f})"]
    if len(cap):
        out.append(f"capture_s (what TE/MCore report): {cap.min():.3f}-{cap.max():.3f} s over {len(cap)} runs")
    if len(excess):
        out.append(f"capture_iteration_excess_s: {excess.min():.3f}-{excess.max():.3f} s over {len(excess)} runs")
    return "\n".join(out)


def loss_drift(sweep: str) -> str:
    """Runs whose lm loss leaves the majority trajectory of the runs that train the same model (same shape, same
    seed, same data): where it starts and how far it goes, relative. The parity floor leans on these figures."""
    it = pd.read_parquet(SweepPaths(EXAMPLES, sweep).iterations).dropna(subset=["loss"])
    if it.empty:
        return "lm loss: none logged"
    runs = pd.read_parquet(EXAMPLES / sweep / "runs.parquet").set_index("run_id")
    # a seed the log does not state is the command's: the builtin trainer seeds repeat k with k
    runs["model"] = [f"seed {s}" if pd.notna(s) else f"repeat {r}" for s, r in zip(runs.seed, runs.repeat)]
    out, n = [], 0
    for _, group in runs.groupby(["shape_id", "model"]):
        loss = it[it.run_id.isin(group.index)].pivot_table(index="iteration", columns="run_id", values="loss")
        if loss.shape[1] < 2:
            continue
        n += loss.shape[1]
        # the value more than half the group's runs printed at each iteration (none where no such value exists:
        # builtin groups of 5 differently graphed runs often share no value, and a tie is no trajectory)
        majority = loss.mode(axis=1)[0]
        held = loss.eq(majority, axis=0).sum(axis=1) * 2 > loss.shape[1]
        rel = loss[held].sub(majority[held], axis=0).abs().div(majority[held].abs(), axis=0)
        for run_id in rel.columns:
            off = rel[run_id][rel[run_id] > 0]
            if len(off):
                out.append(f"{run_id} from iteration {off.index[0]} (at most {off.max():.1e} relative, iteration "
                           f"{off.idxmax()})")
    return f"lm loss: {n - len(out)} of {n} runs print their model's majority value wherever one exists" + (
        "; leaving it: " + "; ".join(out) if out else "")


def launch(sweep: str) -> str:
    """Per shape: how busy the GPU is during an eager step (measured in the eager training processes), the ceiling
    eager step / busy, and the best speedup a graph variant measured against it (a graph at or below the ceiling)."""
    cmp = pd.read_parquet(EXAMPLES / sweep / "comparison.parquet")
    if "graph_ceiling" not in cmp.columns or cmp.graph_ceiling.isna().all():
        return "launch-bound: not measured (these logs predate the GPU-busy diagnostic, 2026-12-01 evening)"
    runs = pd.read_parquet(EXAMPLES / sweep / "runs.parquet")
    lines = ["| shape | eager ms | GPU busy ms (runs) | busy share | ceiling | best graph measured | at or below the ceiling |",
             "|---|---|---|---|---|---|---|"]
    for sid, cells in cmp[cmp.variant != "aa"].groupby("shape_id", sort=False):
        c = cells.dropna(subset=["graph_ceiling"])
        if not len(c):
            continue
        first = c.iloc[0]
        busy = runs[(runs.shape_id == sid) & runs.gpu_busy_ms.notna()].gpu_busy_ms
        timed = cells.dropna(subset=["speedup"])
        best = timed.loc[timed.speedup.idxmax()] if len(timed) else None
        best_text = f"{best.speedup:.2f}x [{best.ci_low:.2f}, {best.ci_high:.2f}] ({best.variant})" if best is not None else "—"
        within = "—" if best is None else ("yes" if best.speedup <= first.graph_ceiling else
                                           f"no: {best.speedup / first.graph_ceiling:.2f}x of it")
        lines.append(f"| {sid} | {first.eager_step_ms:.2f} | {first.eager_gpu_busy_ms:.2f} ({busy.min():.2f}-{busy.max():.2f}) | "
                     f"{first.gpu_busy_share:.0%} | {first.graph_ceiling:.2f}x | {best_text} | {within} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    global EXAMPLES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="*", default=list(SWEEPS))
    ap.add_argument("--results", type=Path, default=EXAMPLES, help="the folder holding the sweeps")
    args = ap.parse_args(argv)
    EXAMPLES = args.results
    for sweep in args.sweeps:
        print(f"## {sweep}\n\n{runs(sweep)}\n{loss_drift(sweep)}\n\n{verdicts(sweep)}\n\n{launch(sweep)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
