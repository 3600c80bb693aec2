"""The decision loop's budget in repeats, raised for one results folder: `graphsweep more-repeats`.

A sweep's loop stops adding repeats at its spec's `decide.max_repeats`. When cells are still undecided there (loop
status `budget`), `graphsweep more-repeats SPEC` raises that budget for the sweep's results folder by writing
`results/{sweep}/extra_repeats.yaml` (`max_repeats: N`, with a history of why); the workflow reads it when it plans
(rules/common.smk), so the next `snakemake` continues the loop on the same looks and boundaries (judge/sequential.py:
they are spread over `decide.horizon`, fixed before any data, so continuing spends no alpha twice). The budget only
grows: a lower one would orphan finished runs. Delete the file to return to the spec's budget.

For an ingested sweep nothing can be submitted from here: more-repeats lists the exact commands of the repeats the
undecided cells need, to run where the logs came from and add to the source folder.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

from graphsweep.fileio import UnusableFile, read_text, write_text
from graphsweep.layout import SweepPaths
from graphsweep.plan.planner import PlannedRun, runs_somewhere
from graphsweep.sweepspec.sweep import Spec
from graphsweep.vocab import LOOP_BUDGET, LOOP_LIVE


class RepeatsError(ValueError):
    """The extra-repeats file or request is unusable; the message names the file and the key."""


FILE_KEYS = ("sweep", "max_repeats", "history")  # what write_raise writes


def _fix(path: Path) -> str:
    return f"fix it (graphsweep more-repeats writes it) or delete {path} to use the spec's decide.max_repeats"


def read_raise(path: str | Path, sweep: str | None = None) -> int | None:
    """The raised budget in jobs per arm; None when the file does not exist. RepeatsError naming the file, key and
    value when it is not what `graphsweep more-repeats` writes (never ignored: it decides which runs are submitted)."""
    path = Path(path)
    if not path.exists():
        return None
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
                           f"with key 'max_repeats' that more-repeats writes; {_fix(path)}")
    unknown = sorted(str(k) for k in raw if k not in FILE_KEYS)
    if unknown:
        raise RepeatsError(f"{path}: unknown key '{unknown[0]}' (the keys are {', '.join(FILE_KEYS)}); {_fix(path)}")
    if sweep is not None and raw.get("sweep", sweep) != sweep:
        raise RepeatsError(f"{path}: key 'sweep' = {raw['sweep']!r}, but this is sweep {sweep!r}; {_fix(path)}")
    n = raw.get("max_repeats")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 64:
        raise RepeatsError(f"{path}: key 'max_repeats' = {n!r}: a budget in jobs per arm is an integer from 1 to 64; "
                           f"{_fix(path)}")
    return n


def apply_raise(spec: Spec, results: str | Path) -> Spec:
    """The spec with the budget more-repeats raised for this results folder (the workflow's view of the sweep).

    A raise beyond the spec's decide.horizon is refused: the looks' boundaries end there."""
    if not spec.loops:  # ingested logs, or the loop switched off: nothing is added from here
        return spec
    path = SweepPaths(results, spec.name).extra_repeats
    n = read_raise(path, spec.name)
    if n is None:
        return spec
    horizon = spec.decide.horizon
    if n > horizon:
        raise RepeatsError(f"{path}: key 'max_repeats' = {n} is beyond the spec's decide.horizon ({horizon}) "
                           f"({spec.path}), where the looks' boundaries end; give at most {horizon}, or delete the file")
    return spec.with_max_repeats(n)


def write_raise(path: Path, sweep: str, max_repeats: int, why: str) -> int:
    """Raise the budget in the file (it only grows); returns the budget it holds now."""
    old = read_raise(path)
    n = max(int(max_repeats), old or 0)
    history = []
    if path.exists():
        history = list((yaml.safe_load(path.read_text()) or {}).get("history", []))
    history.append({"utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "max_repeats": n,
                    "why": why})
    header = ("# Written by `graphsweep more-repeats`: the decision loop's budget in jobs per arm for this results\n"
              "# folder. The workflow reads it; delete it to return to the spec's decide.max_repeats.\n")
    write_text(path, header + yaml.safe_dump({"sweep": sweep, "max_repeats": n, "history": history},
                                             sort_keys=False))
    return n


# --------------------------------------------------------------------------------------------------
# What more repeats would buy


@dataclass
class CellNeed:
    """An undecided cell and what the loop estimates it needs."""

    cell_id: str
    verdict: str
    status: str  # comparison.parquet loop_status
    have: int  # jobs per arm at its last look
    need: int | None  # jobs per arm the loop estimates decide it with 80 % power (None: not within the horizon)
    gpu_hours: float | None  # what the rounds to get there cost (its arm, its shape's baseline and A/A control)


def undecided(comparison: pd.DataFrame) -> list[CellNeed]:
    """The cells the loop left undecided for want of repeats (loop_status budget or live), A/A controls aside."""
    if "loop_status" not in comparison.columns:
        return []
    rows = comparison[comparison.loop_status.isin([LOOP_BUDGET, LOOP_LIVE])]
    out = []
    for _, r in rows.iterrows():
        need = r.get("repeats_to_decide")
        hours = r.get("gpu_hours_to_decide")
        have = r.get("loop_repeats")
        out.append(CellNeed(str(r.cell_id), str(r.verdict), str(r.loop_status),
                            int(have) if have is not None and pd.notna(have) else 0,
                            int(need) if need is not None and pd.notna(need) else None,
                            float(hours) if hours is not None and pd.notna(hours) else None))
    return out


def target_for(needs: Sequence[CellNeed], horizon: int) -> int | None:
    """The budget that lets the loop reach every undecided cell's estimate (capped at the horizon); None: nothing
    to add (no cell needs more than it has)."""
    wanted = [min(n.need if n.need is not None else horizon, horizon) for n in needs]
    best = max(wanted, default=0)
    have = max((n.have for n in needs), default=0)
    return best if best > have else None


def new_runs(planned: Sequence[PlannedRun], before: int, after: int, cells: Sequence[str]) -> list[PlannedRun]:
    """The runs a budget of `after` jobs per arm may add over `before` for the undecided `cells` (their graph arms,
    their shapes' eager baselines and A/A controls), preflight-blocked ones aside: the most the loop would submit where
    the sweep runs (a run blocked only because this machine has no CUDA device counts: more-repeats is often asked on
    a login node or a laptop)."""
    shapes = {p.run.shape_id for p in planned if p.run.cell_id in cells}
    out = []
    for p in planned:
        if not runs_somewhere(p) or not before < p.run.repeat <= after:
            continue
        if p.run.cell_id in cells or (p.run.shape_id in shapes and p.run.cell_id not in cells
                                      and not p.run.variant.is_graph):
            out.append(p)
    return out


def hours(runs: Sequence[PlannedRun], planned: Sequence[PlannedRun], took: Mapping[str, float]) -> float:
    """GPU-hours of `runs`: each priced at what its cell's arm took when it ran (the median of the finished runs
    `took` has, by planned run id: store/timeparts.spent_by_run), else at the plan's estimate. The same pricing as
    the comparison's "GPU-h more" (judge/compare.py _repeat_cost): a pair job costs both arms, not the model's guess."""
    ran: dict[tuple[str, str], list[float]] = {}
    for p in planned:
        if p.run.run_id in took:
            ran.setdefault((p.run.cell_id, p.run.arm), []).append(took[p.run.run_id])
    def cost(p: PlannedRun) -> float:
        seen = ran.get((p.run.cell_id, p.run.arm))
        return float(statistics.median(seen)) if seen else p.est_gpu_seconds
    return sum(cost(p) for p in runs) / 3600.0


def describe_need(n: CellNeed) -> str:
    """One cell's line in more-repeats' listing (numbers, then words)."""
    need = f"about {n.need} jobs per arm would decide it" if n.need else "not decidable within the horizon"
    cost = f", about {n.gpu_hours:.2f} GPU-hours more" if n.gpu_hours is not None and math.isfinite(n.gpu_hours) \
        else ""
    return f"{n.cell_id}: {n.verdict} at {n.have} jobs per arm ({n.status}); {need}{cost}"


def history_of(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return list((yaml.safe_load(path.read_text()) or {}).get("history", []))
