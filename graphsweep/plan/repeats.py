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

import pandas as pd
import yaml

from graphsweep.fileio import write_text
from graphsweep.judge import interval as iv
from graphsweep.plan.cost import correction, spent_by_run
from graphsweep.plan.planner import plan_sweep, submitted
from graphsweep.sweepspec.sweep import Spec
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile, read_text
from graphsweep.records import RunSpec
from graphsweep.vocab import EAGER, INCONCLUSIVE, USABLE_OUTCOMES
from graphsweep.workloads.registry import for_run

DEFAULT_CAP = 10  # repeats per arm: beyond this, more jobs rarely pay for themselves (docs/statistics.md)
DEFAULT_PRINT_STEP_MS = 0.1  # Megatron prints elapsed time with {:.1f}; for runs parsed before the column existed


class RepeatsError(ValueError):
    """The extra-repeats file or request is unusable; the message names the file and the key."""


def extra_repeats_path(results: str | Path, sweep: str) -> Path:
    return SweepPaths(results, sweep).extra_repeats


FILE_KEYS = ("sweep", "repeats", "history")  # what write_extra writes


def _fix(path: Path) -> str:
    return f"fix it (graphsweep more-repeats writes it) or delete {path} to use the spec's repeats"


def read_extra(path: str | Path, sweep: str | None = None) -> dict[str, int]:
    """cell id -> repeats wanted; {} when the file does not exist; RepeatsError naming the file, key and value when
    it is not what `graphsweep more-repeats` writes (never ignored: it decides which runs are submitted)."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        raw = yaml.safe_load(read_text(path, _fix(path)))
    except UnusableFile as exc:
        raise RepeatsError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise RepeatsError(f"{path}: not valid YAML ({where}{getattr(exc, 'problem', None) or exc}); "
                           f"{_fix(path)}") from None
    if not isinstance(raw, dict):
        raise RepeatsError(f"{path}: holds {type(raw).__name__ if raw is not None else 'nothing'}, not the mapping "
                           f"with key 'repeats' (cell id -> repeats) that more-repeats writes; {_fix(path)}")
    unknown = sorted(str(k) for k in raw if k not in FILE_KEYS)
    if unknown:
        raise RepeatsError(f"{path}: unknown key '{unknown[0]}' (the keys are {', '.join(FILE_KEYS)}); {_fix(path)}")
    if sweep is not None and raw.get("sweep", sweep) != sweep:
        raise RepeatsError(f"{path}: key 'sweep' = {raw['sweep']!r}, but this is sweep {sweep!r}; {_fix(path)}")
    cells = raw.get("repeats")
    if not isinstance(cells, dict):
        raise RepeatsError(f"{path}: key 'repeats' = {cells!r}: must map cell ids to repeat counts; {_fix(path)}")
    out = {}
    for cell, n in cells.items():
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 100:
            raise RepeatsError(f"{path}: key 'repeats.{cell}' = {n!r}: a repeat count is an integer from 1 to 100")
        out[str(cell)] = n
    return out


def apply_extra(spec: Spec, results: str | Path) -> Spec:
    """The spec with the repeats `graphsweep more-repeats` asked for (the workflow's view of the sweep).

    A cell id the sweep does not have is refused (after an edit of the spec, or a file of another sweep): its
    repeats would silently go nowhere."""
    if spec.is_ingest:  # ingested logs: nothing is submitted, so more repeats cannot come from here
        return spec
    path = extra_repeats_path(results, spec.name)
    extra = read_extra(path, spec.name)
    if not extra:
        return spec
    cells = {c.cell_id for c in spec.cells()}
    strange = sorted(c for c in extra if c not in cells)
    if strange:
        shown = ", ".join(strange[:3]) + (f" and {len(strange) - 3} more" if len(strange) > 3 else "")
        raise RepeatsError(f"{path}: key 'repeats' names cell(s) {shown} that sweep '{spec.name}' ({spec.path}) does "
                           f"not have; remove them, or delete the file to use the spec's repeats")
    return spec.with_extra_repeats(extra)


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
    header = (
        "# Written by `graphsweep more-repeats`: repeats wanted per cell (its graph arm and its shape's eager\n"
        "# baseline, or its pair jobs). The workflow reads it; delete it to return to the spec's repeats.\n"
    )
    write_text(path, header + yaml.safe_dump(doc, sort_keys=False))
    return merged


# --------------------------------------------------------------------------------------------------
# How many


def suggested_repeats(
    eager_ms: Sequence[float | None],
    graph_ms: Sequence[float | None],
    *,
    margin: float,
    eager_step_ms: Sequence[float] | float = 0.1,
    graph_step_ms: Sequence[float] | float = 0.1,
    cap: int = DEFAULT_CAP,
) -> tuple[int, str]:
    """(repeats per arm, why) for an inconclusive cell from its runs' steady medians and print steps.

    The planned n of the second look: jobs per arm at which the cell reaches the verdict its current estimate
    implies with 80 % power at the second look's alpha (interval.repeats_for_power, the judge's own rule), the
    same figure the cell's reason gives. Capped, and always at least one more than the cell has.
    """
    e = [float(x) for x in eager_ms if x and math.isfinite(x) and x > 0]
    g = [float(x) for x in graph_ms if x and math.isfinite(x) and x > 0]
    have = max(len(e), len(g))
    if not e or not g:
        return min(cap, max(iv.MIN_OWN_JOBS, have + 1)), "an arm has no usable run: no spread to plan with"
    step_e = eager_step_ms if isinstance(eager_step_ms, (int, float)) else list(eager_step_ms)[: len(e)]
    step_g = graph_step_ms if isinstance(graph_step_ms, (int, float)) else list(graph_step_ms)[: len(g)]
    ea, ga = iv.summarize_arm(e, step_e), iv.summarize_arm(g, step_g)
    estimate = math.exp(ea.mean_log - ga.mean_log)
    need = iv.repeats_for_power(ea, ga, margin=margin, cap=cap)
    if need is None:
        return cap, (f"estimate {estimate:.3f}x: no n up to {cap} reaches 80% power (it sits on a margin edge, or "
                     f"the print step limits it): capped at {cap}")
    target = max(need, have + 1)
    return target, f"about {target} repeats per arm for 80% power at the second look (estimate {estimate:.3f}x)"


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


def require_adaptive(spec: Spec) -> None:
    """More repeats are a second look: only for a sweep judged for two (`adaptive_repeats: true`)."""
    if not spec.adaptive_repeats:
        raise RepeatsError(
            f"{spec.path}: key 'adaptive_repeats' = false: the verdicts spent all of alpha 0.05 at the first look, so "
            "a second look would raise the false-verdict rate; set adaptive_repeats: true (each look at 0.025), "
            "rerun snakemake to re-judge, then run more-repeats"
        )


def plan_more_repeats(
    spec: Spec,
    comparison: Any,
    runs: Any,
    *,
    target_repeats: int | None = None,
    cap: int = DEFAULT_CAP,
    margin: float | None = None,
) -> list[CellPlan]:
    """One CellPlan per inconclusive cell (A/A control cells included: an undecided control says little).

    Only for a sweep whose spec says `adaptive_repeats: true`: its verdicts spent half of alpha at the first look,
    the other half is for this one. A cell that had its second look gets no third (nothing is left to spend).
    """
    require_adaptive(spec)
    margin = float(spec.margin if margin is None else margin)
    cells = {c.cell_id: c for c in spec.cells()}
    med: dict[str, float] = {}
    step: dict[str, float] = {}
    spent: dict[str, float] = {}
    if runs is not None and len(runs):
        usable = runs[runs.outcome.isin(USABLE_OUTCOMES)] if "outcome" in runs.columns else runs
        med = {r: float(m) for r, m in zip(usable.run_id, usable.get("step_ms_median", [])) if pd.notna(m)}
        step = {r: float(q) for r, q in zip(usable.run_id, usable.get("elapsed_resolution_ms", [])) if pd.notna(q)}
        spent = spent_by_run(runs)
    plans: list[CellPlan] = []
    targets: dict[str, int] = {}
    why: dict[str, str] = {}
    for _, row in comparison[comparison.verdict == INCONCLUSIVE].iterrows():
        cell = cells.get(row.cell_id)
        if cell is None:
            continue  # the spec no longer has this cell
        have = len(cell.graph_run_ids)
        if row.cell_id in spec.extra_repeats:
            plans.append(CellPlan(row.cell_id, row.verdict, have, have, "had its second look already: a third is "
                                  "not covered by the two-look alpha split (docs/statistics.md)", [], 0.0))
            continue
        if target_repeats is not None:
            target, reason = int(target_repeats), f"--target-repeats {target_repeats}"
        else:
            e_ids = [r for r in cell.eager_run_ids if med.get(r)]
            g_ids = [r for r in cell.graph_run_ids if med.get(r)]
            target, reason = suggested_repeats(
                [med[r] for r in e_ids], [med[r] for r in g_ids], margin=margin, cap=cap,
                eager_step_ms=[step.get(r, DEFAULT_PRINT_STEP_MS) for r in e_ids],
                graph_step_ms=[step.get(r, DEFAULT_PRINT_STEP_MS) for r in g_ids],
            )
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
    fix = correction(plan_sweep(spec), spent)  # what the finished runs took: the new runs cost that
    claimed: set[str] = set()
    for cell_id, target in targets.items():
        mine = [r for r in added if r.cell_id == cell_id]
        # a shared eager baseline grows once per shape: its new runs are listed under the first cell that needs them
        eager = [r for r in added if r.arm == EAGER and r.shape_id == shape_of[cell_id] and r.run_id not in claimed]
        eager = [r for r in eager if r.repeat <= target]
        claimed.update(r.run_id for r in eager)
        new = mine + eager
        cost = sum(fix.cost(r, for_run(r).estimate(r)) for r in new)
        plans.append(CellPlan(cell_id, INCONCLUSIVE, len(cells[cell_id].graph_run_ids), target, why[cell_id],
                              [r.run_id for r in new], cost))  # fmt: skip
    return plans
