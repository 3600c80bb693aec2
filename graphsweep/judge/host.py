"""How much of the eager step's host time a cell's graph scopes take off the host, and what stays eager, by region.

A CUDA graph replays the launches of what it captured and nothing else (graphsweep/entry/host_time.py COVERS: which
regions each scope's graph replaces). The eager runs of the shape measured their host time by region in the profiled
window (runs.parquet `host_<region>_ms`, rank 0's line); a cell's figures are those of its shape's eager runs read
through its variant's scopes:

- `eager_host_step_ms`: the median over the eager runs of their host ms per iteration;
- `host_<region>_share`: the mean over the eager runs of each run's share of its step (a mean, so the shares add
  up to 1, as each run's regions add up to its step);
- `host_covered`: the regions the variant's scopes cover (joined with `+`), `host_covered_share` their shares' sum;
- `host_shares_of`: `steady step` when every eager run's line gave its regions' profiler events, so the profiler's
  own cost per event came off each region (host_time.steady_shares), else `profiled window` (logs of ad664cb);
- `host_estimate_speedup`: eager step / host_time.scope_estimate: the speedup if the graph took exactly its
  regions' host time off the step (never past the GPU's busy time), an estimate to read beside the measured one.

A full-iteration graph covers every region; an A/A control cell covers none and gets no figures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from graphsweep.entry import host_time
from graphsweep.vocab import NO_GRAPH

STEADY, WINDOW = "steady step", "profiled window"  # what host_<region>_share is a share of (host_shares_of)
FULL_ITERATION = "full_iteration"  # plan.parquet's impl of a full-iteration graph (and the scope COVERS knows it by)


def scopes_of(impl: str, scope: str) -> tuple[str, ...]:
    """The graph scopes of a cell (plan.parquet impl and `+`-joined scope), as host_time.COVERS names them."""
    if impl == FULL_ITERATION:
        return (FULL_ITERATION,)
    return tuple(s for s in str(scope or "").split("+") if s)


def _shares(run: Any) -> tuple[dict[str, float], bool]:
    """One eager run's share of its step per region, and whether they are of the steady step (the line gave each
    region's profiler events, so host_time.steady_shares takes the profiler's cost off) or of the profiled window."""
    def num(col: str) -> float | None:
        v = pd.to_numeric(getattr(run, col, None), errors="coerce")
        return None if v is None or v != v else float(v)

    regions = {r: (num(host_time.ms_column(r)) or 0.0, num(host_time.wait_column(r)), num(host_time.events_column(r)))
               for r in host_time.REGIONS}
    steady = num("step_ms_median") or 0.0
    shares = host_time.steady_shares(regions, num("host_step_ms") or 0.0, steady)
    return shares, all(e is not None for _, _, e in regions.values()) and steady > 0


def cover(eager_runs: pd.DataFrame, impl: str, scope: str) -> dict[str, Any]:
    """The cell's host-time figures (module docstring); {} when no eager run measured its host time, or for a cell
    without a graph (A/A)."""
    if impl == NO_GRAPH or "host_step_ms" not in eager_runs.columns:
        return {}
    runs = eager_runs[pd.to_numeric(eager_runs.host_step_ms, errors="coerce") > 0]
    if not len(runs):
        return {}
    per_run = [_shares(r) for r in runs.itertuples()]
    shares = {region: float(np.mean([s.get(region, 0.0) for s, _ in per_run])) for region in host_time.REGIONS}
    scopes = scopes_of(impl, scope)
    covered = host_time.covered_regions(scopes)
    step = float(np.median(pd.to_numeric(runs.step_ms_median, errors="coerce").dropna())) \
        if "step_ms_median" in runs.columns and runs.step_ms_median.notna().any() else None
    busy = pd.to_numeric(runs.gpu_busy_ms, errors="coerce").dropna() if "gpu_busy_ms" in runs.columns else None
    busy_ms = float(np.median(busy)) if busy is not None and len(busy) else None
    estimate = step / host_time.scope_estimate(step, busy_ms, shares, scopes) if step else None
    return {
        "eager_host_step_ms": float(np.median(pd.to_numeric(runs.host_step_ms).to_numpy())),
        "host_shares_of": STEADY if all(ok for _, ok in per_run) else WINDOW,
        "host_covered": "+".join(covered),
        "host_covered_share": float(sum(shares[r] for r in covered)),
        "host_estimate_speedup": estimate,
        **{host_time.share_column(r): v for r, v in shares.items()},
    }


ROW_KEYS = ("host_covered", *(host_time.share_column(r) for r in host_time.REGIONS))  # what stays_eager reads


def stays_eager(row: Any, floor: float = 0.005) -> list[tuple[str, float]]:
    """(region, share) of the eager step's host time the cell's scopes leave on the host, largest first; regions
    under `floor` (half a percent: what the report rounds to 0 %) left out."""
    covered = set(str(row.get("host_covered") or "").split("+"))
    out = []
    for region in host_time.REGIONS:
        share = row.get(host_time.share_column(region))
        if region not in covered and share is not None and share == share and share >= floor:
            out.append((region, float(share)))
    return sorted(out, key=lambda x: -x[1])
