"""How much of the eager step's host time a cell's graph scopes take off the host, and what stays eager, by region.

A CUDA graph replays the launches of what it captured and nothing else (graphsweep/entry/host_time.py COVERS: which
regions each scope's graph replaces). The eager runs of the shape measured their host time by region in the profiled
window (runs.parquet `host_<region>_ms`, rank 0's line); a cell's figures are those of its shape's eager runs read
through its variant's scopes:

- `eager_host_step_ms`: the median over the eager runs of their host ms per iteration;
- `host_<region>_share`: the mean over the eager runs of each run's region / its step (a mean, so the shares add up
  to 1, as each run's regions add up to its step);
- `host_covered`: the regions the variant's scopes cover (joined with `+`), `host_covered_share` their shares' sum.

A full-iteration graph covers every region; an A/A control cell covers none and gets no figures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from graphsweep.entry import host_time
from graphsweep.vocab import NO_GRAPH

FULL_ITERATION = "full_iteration"  # plan.parquet's impl of a full-iteration graph (and the scope COVERS knows it by)


def scopes_of(impl: str, scope: str) -> tuple[str, ...]:
    """The graph scopes of a cell (plan.parquet impl and `+`-joined scope), as host_time.COVERS names them."""
    if impl == FULL_ITERATION:
        return (FULL_ITERATION,)
    return tuple(s for s in str(scope or "").split("+") if s)


def cover(eager_runs: pd.DataFrame, impl: str, scope: str) -> dict[str, Any]:
    """The cell's host-time figures (module docstring); {} when no eager run measured its host time, or for a cell
    without a graph (A/A)."""
    if impl == NO_GRAPH or "host_step_ms" not in eager_runs.columns:
        return {}
    runs = eager_runs[pd.to_numeric(eager_runs.host_step_ms, errors="coerce") > 0]
    if not len(runs):
        return {}
    step = pd.to_numeric(runs.host_step_ms)
    shares = {}
    for region in host_time.REGIONS:
        col = host_time.ms_column(region)
        ms = pd.to_numeric(runs[col], errors="coerce").fillna(0.0) if col in runs.columns else 0.0 * step
        shares[region] = float(np.mean(ms.to_numpy() / step.to_numpy()))
    covered = host_time.covered_regions(scopes_of(impl, scope))
    return {
        "eager_host_step_ms": float(np.median(step.to_numpy())),
        "host_covered": "+".join(covered),
        "host_covered_share": float(sum(shares[r] for r in covered)),
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
