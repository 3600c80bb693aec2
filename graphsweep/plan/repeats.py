"""Adaptive repeats: more repeated jobs for the cells whose verdict is `inconclusive`, and only for those.

`graphsweep more-repeats` writes `results/{sweep}/extra_repeats.yaml` (cell id -> repeats wanted). The workflow
reads it when it loads the spec (rules/common.smk), so the next `snakemake` plans the extra repeat indices of
those cells - their graph arm and their shape's eager baseline, or more pair jobs under `pairing` - and nothing
else: run ids are `...r{k}`, finished runs keep their ids and their files, and only the new ones are submitted.
Targets only ever grow (a smaller number would orphan finished runs); delete the file to return to the spec.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from graphsweep.judge import verdict as stats
from graphsweep.plan.planner import plan_sweep, submitted
from graphsweep.sweepspec.sweep import Spec
from graphsweep.vocab import EAGER, INCONCLUSIVE, USABLE_OUTCOMES, RunSpec, SweepPaths
from graphsweep.workloads.registry import for_run

DEFAULT_CAP = 10  # repeats per arm: beyond this, more jobs rarely pay for themselves (docs/statistics.md)
WITHIN_RUN_TARGET = 3  # one usable run per arm: the interval was within-run only; 3 gives a between-job one


class RepeatsError(ValueError):
    """The extra-repeats file or request is unusable; the message names the file and the key."""


def extra_repeats_path(results: str | Path, sweep: str) -> Path:
    return SweepPaths(results, sweep).extra_repeats


def read_extra(path: str | Path) -> dict[str, int]:
    """cell id -> repeats wanted; {} when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise RepeatsError(f"{path}: not valid YAML ({exc}); fix it or delete it to use the spec's repeats") from None
    cells = raw.get("repeats", {}) if isinstance(raw, dict) else None
    if not isinstance(cells, dict):
        raise RepeatsError(f"{path}: key 'repeats' must map cell ids to repeat counts; delete the file to start over")
    out = {}
    for cell, n in cells.items():
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 100:
            raise RepeatsError(f"{path}: key 'repeats.{cell}' = {n!r}: a repeat count is an integer from 1 to 100")
        out[str(cell)] = n
    return out


def apply_extra(spec: Spec, results: str | Path) -> Spec:
    """The spec with the repeats `graphsweep more-repeats` asked for (the workflow's view of the sweep)."""
    if "source" in spec.raw:  # ingested logs: nothing is submitted, so more repeats cannot come from here
        return spec
    extra = read_extra(extra_repeats_path(results, spec.name))
    return spec.with_extra_repeats(extra) if extra else spec


def write_extra(path: Path, sweep: str, targets: Mapping[str, int], notes: Mapping[str, str]) -> dict[str, int]:
    """Merge targets into the file (each cell keeps the larger count); returns the merged map."""
    merged = read_extra(path)
    for cell, n in targets.items():
        merged[cell] = max(int(n), merged.get(cell, 0))
    old = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    history = list(old.get("history", [])) + [
        {"utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
         "cells": {c: {"repeats": int(n), "why": notes.get(c, "")} for c, n in targets.items()}}
    ]  # fmt: skip
    doc = {"sweep": sweep, "repeats": dict(sorted(merged.items())), "history": history}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    header = (
        "# Written by `graphsweep more-repeats`: repeats wanted per cell (its graph arm and its shape's eager\n"
        "# baseline, or its pair jobs). The workflow reads it; delete it to return to the spec's repeats.\n"
    )
    tmp.write_text(header + yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)
    return merged


# --------------------------------------------------------------------------------------------------
# How many


def suggested_repeats(
    eager_ms: Sequence[float],
    graph_ms: Sequence[float],
    *,
    margin: float,
    paired: bool = False,
    confidence: float = 0.95,
    cap: int = DEFAULT_CAP,
) -> tuple[int, str]:
    """(repeats per arm, why) for a cell from its runs' steady medians (in repeat order when paired).

    The same figure stats.judge_cell prints in an inconclusive reason ("about N repeats per arm at this
    spread"): the interval half-width at the observed spread must shrink below the distance from the estimate to
    the nearest margin edge (stats.repeats_needed). Capped, and always at least one more than the cell has.
    """
    e = np.asarray([x for x in eager_ms if x and math.isfinite(x) and x > 0], dtype=float)
    g = np.asarray([x for x in graph_ms if x and math.isfinite(x) and x > 0], dtype=float)
    have = max(e.size, g.size)
    if e.size == 0 or g.size == 0:
        return min(cap, max(WITHIN_RUN_TARGET, have + 1)), "an arm has no usable run: no spread to plan with"
    pairs = None
    if paired:
        n = min(len(eager_ms), len(graph_ms))
        ok = [(a, b) for a, b in zip(eager_ms[:n], graph_ms[:n]) if a and b and math.isfinite(a) and math.isfinite(b)]
        pairs = np.asarray(ok, dtype=float) if len(ok) >= 2 else None
    if pairs is None and e.size + g.size < 3:
        return min(cap, max(WITHIN_RUN_TARGET, have + 1)), "1 repeat per arm: the interval was within-run only"
    # stats' own planning figures (the function judge_cell uses), so the number matches the report's reason
    b = stats.between_runs(e, g, pairs, confidence)
    est, plan_sd, n_plan = b.estimate, b.plan_sd, b.n_plan
    need = stats.repeats_needed(plan_sd, est, margin, confidence) if math.isfinite(plan_sd) else None
    if need is None:
        return cap, f"estimate {est:.3f}x sits on the margin edge: capped at {cap}"
    target = max(need, n_plan + 1)
    if target > cap:
        return cap, f"about {target} repeats per arm at this spread (sd {plan_sd:.3f} of log step): capped at {cap}"
    return target, f"about {target} repeats per arm at this spread (sd {plan_sd:.3f} of log step time)"


@dataclass
class CellPlan:
    cell_id: str
    verdict: str
    have: int  # repeats the cell has now (its graph arm, or its pair jobs)
    target: int
    why: str
    new_runs: list[str]
    gpu_seconds: float  # estimated cost of the new runs


def new_runs(before: Spec, after: Spec) -> list[RunSpec]:
    """Runs of `after` that `before` does not have, preflight-blocked ones excluded (they are never submitted)."""
    old = {r.run_id for r in before.runs()}
    submit = {p.run.run_id for p in submitted(plan_sweep(after))}
    return [r for r in after.runs() if r.run_id not in old and r.run_id in submit]


def run_cost(run: RunSpec, spent: Mapping[str, float]) -> float:
    """GPU-seconds a new run will take: what this cell's (or shape's) finished runs of that arm took, else the
    planner's estimate."""
    if run.is_pair:
        same = [v for k, v in spent.items() if k.startswith(f"{run.cell_id}.pair.r")]
        done = {k.rsplit(".", 1)[0] for k in spent if k.startswith(f"{run.cell_id}.pair.r")}
        if done:
            return sum(same) / len(done)
    else:
        prefix = f"{run.cell_id}.r"
        same = [v for k, v in spent.items() if k.startswith(prefix)]
        if same:
            return float(sorted(same)[len(same) // 2])
    return float(for_run(run).estimate(run))


def plan_more_repeats(
    spec: Spec,
    comparison: Any,
    runs: Any,
    *,
    target_repeats: int | None = None,
    cap: int = DEFAULT_CAP,
    margin: float | None = None,
) -> list[CellPlan]:
    """One CellPlan per inconclusive cell (A/A control cells included: an undecided control says little)."""
    margin = float(spec.raw.get("margin", 0.02) if margin is None else margin)
    cells = {c.cell_id: c for c in spec.cells()}
    med = {}
    spent: dict[str, float] = {}
    if runs is not None and len(runs):
        usable = runs[runs.outcome.isin(USABLE_OUTCOMES)] if "outcome" in runs.columns else runs
        med = {r: float(m) for r, m in zip(usable.run_id, usable.get("step_ms_median", [])) if pd.notna(m)}
        if "gpu_seconds" in runs.columns:
            spent = {r: float(s) for r, s in zip(runs.run_id, runs.gpu_seconds) if pd.notna(s)}
    plans: list[CellPlan] = []
    targets: dict[str, int] = {}
    why: dict[str, str] = {}
    for _, row in comparison[comparison.verdict == INCONCLUSIVE].iterrows():
        cell = cells.get(row.cell_id)
        if cell is None:
            continue  # the spec no longer has this cell
        have = len(cell.graph_run_ids)
        if target_repeats is not None:
            target, reason = int(target_repeats), f"--target-repeats {target_repeats}"
        else:
            e = [med.get(r) for r in cell.eager_run_ids]
            g = [med.get(r) for r in cell.graph_run_ids]
            if not spec.pairing:
                e, g = [x for x in e if x], [x for x in g if x]
            target, reason = suggested_repeats(e, g, margin=margin, paired=spec.pairing, cap=cap)
        if target <= have:
            plans.append(CellPlan(row.cell_id, row.verdict, have, have, f"{reason}: has {have} already", [], 0.0))
            continue
        targets[row.cell_id], why[row.cell_id] = target, reason
    if not targets:
        return plans
    grown = {c: max(n, spec.extra_repeats.get(c, 0)) for c, n in targets.items()}
    after = spec.with_extra_repeats({**spec.extra_repeats, **grown})
    added = new_runs(spec, after)
    shape_of = {c: cells[c].shape_id for c in targets}
    claimed: set[str] = set()
    for cell_id, target in targets.items():
        mine = [r for r in added if r.cell_id == cell_id]
        # a shared eager baseline grows once per shape: its new runs are listed under the first cell that needs them
        eager = [r for r in added if r.arm == EAGER and r.shape_id == shape_of[cell_id] and r.run_id not in claimed]
        eager = [r for r in eager if r.repeat <= target]
        claimed.update(r.run_id for r in eager)
        new = mine + eager
        cost = sum(run_cost(r, spent) for r in new)
        plans.append(CellPlan(cell_id, INCONCLUSIVE, len(cells[cell_id].graph_run_ids), target, why[cell_id],
                              [r.run_id for r in new], cost))  # fmt: skip
    return plans
