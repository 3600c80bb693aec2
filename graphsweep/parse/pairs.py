"""A pair job's combined log, back into its segments and its two measured arms (spec `pairing: true`).

Each arm becomes one "virtual run" per job (`{cell_id}.pair.r{k}.eager` / `.graph`): its steady iterations are
those of its two segments' steady windows together, its outcome the worse of the two (vocab.OUTCOME_SEVERITY). The
cell's interval then comes from the per-job log-ratios (graphsweep/judge), free of node-to-node variance.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from graphsweep import logformat as lf
from graphsweep.parse.segments import Segment
from graphsweep.vocab import OUTCOME_SEVERITY, UNPARSEABLE, USABLE_OUTCOMES


def worse_outcome(outcomes: Sequence[str]) -> str:
    """The arm's outcome from its segments': infrastructure first, then blocked > oom > invalid > crashed > ..."""
    def rank(o: str) -> int:  # unknown: infrastructure, worst
        return OUTCOME_SEVERITY.index(o) if o in OUTCOME_SEVERITY else len(OUTCOME_SEVERITY)

    return max(outcomes, key=rank) if outcomes else UNPARSEABLE


@dataclass
class ArmOfPair:
    """One measured arm of one pair job (a row of runs.parquet)."""

    run_id: str
    arm: str
    labels: list[str]
    summary: dict[str, Any]
    iterations: Any  # pandas.DataFrame
    wall_s: float = 0.0
    gpu_seconds: float = 0.0
    segment_summaries: list[dict[str, Any]] = field(default_factory=list)


def _nan_to_none(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def combine_arm(run_id: str, arm: str, parsed: Sequence[tuple[Segment, Any]]) -> ArmOfPair:
    """One virtual run from an arm's segments (label order): pooled steady windows, worse outcome, max memory.

    `parsed` holds (segment, parse.ParsedRun) pairs. Iterations are numbered on through the segments (segment 2's
    first iteration follows segment 1's last) so a trace reads left to right; `segment` and `segment_iteration`
    keep where each came from, `steady` marks the rows inside that segment's steady window.
    """
    if not parsed:  # the job never started this arm (driver failed, job killed before it)
        summary = {"outcome": UNPARSEABLE, "arm": arm, "steady_n": 0, "measurement_usable": False, "segments": [],
                   "reason": f"no {arm} segment in the pair job's log (the ABBA driver never started one)"}
        return ArmOfPair(run_id, arm, [], summary, pd.DataFrame({"run_id": pd.Series(dtype=str)}))
    frames, sums, offset, steady_ms = [], [], 0, []
    for seg, p in parsed:
        s = p.summary.to_dict()
        sums.append(s)
        it = p.iterations.copy()
        it["segment"] = seg.label
        it["segment_iteration"] = it["iteration"]
        first, last = s.get("steady_first"), s.get("steady_last")
        usable = s.get("measurement_usable") and first is not None and last is not None
        it["steady"] = it.iteration.between(first, last) if usable else False
        if usable:
            steady_ms += it.loc[it.steady, "elapsed_ms"].dropna().astype(float).tolist()
        it["iteration"] = it["iteration"] + offset
        offset = int(it["iteration"].max()) if len(it) else offset
        it["run_id"] = run_id
        frames.append(it)
    iterations = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"run_id": pd.Series(dtype=str)})
    outcome = worse_outcome([s["outcome"] for s in sums])
    worst = next((s for s in sums if s["outcome"] == outcome), sums[0])
    labels = [seg.label for seg, _ in parsed]
    summary = dict(worst)  # reason, error class, signature: from the segment that decided the outcome
    each = ", ".join(f"{label} {s['outcome']}" for label, s in zip(labels, sums))
    summary.update(
        outcome=outcome,
        reason=f"{outcome} ({each}): {worst.get('reason', '')}",
        n_iterations=sum(int(s.get("n_iterations") or 0) for s in sums),
        steady_first=None,  # two windows, one per segment: the `steady` column of iterations.parquet marks them
        steady_last=None,
        steady_n=len(steady_ms) if outcome in USABLE_OUTCOMES else 0,
        steady_reason="; ".join(f"{l}: {s.get('steady_reason', '')}" for l, s in zip(labels, sums)),
        peak_mem_gb=max((s["peak_mem_gb"] for s in sums if s.get("peak_mem_gb") is not None), default=None),
        peak_mem_before_capture_gb=max(
            (s["peak_mem_before_capture_gb"] for s in sums if s.get("peak_mem_before_capture_gb") is not None),
            default=None,
        ),
        capture_seen=all(bool(s.get("capture_seen")) for s in sums),
        replay_seen=all(bool(s.get("replay_seen")) for s in sums),
        capture_s=max((s["capture_s"] for s in sums if s.get("capture_s") is not None), default=None),
        # what the arm held in both of its processes: the fewer graphs of its two segments
        graphs_captured=min((s["graphs_captured"] for s in sums if s.get("graphs_captured") is not None), default=None),
        # the arm's two segments are two processes: the larger of each figure, as for peak_mem_gb
        **{key: max((s[key] for s in sums if s.get(key) is not None), default=None) for key in (
            "steady_mem_allocated_gb", "steady_mem_reserved_gb", "steady_mem_peak_gb", "capture_iteration_excess_s")},
        seed=next((s["seed"] for s in sums if s.get("seed") is not None), None),
        elapsed_resolution_ms=max(
            (s["elapsed_resolution_ms"] for s in sums if s.get("elapsed_resolution_ms") is not None), default=None
        ),
        measurement_usable=all(bool(s.get("measurement_usable")) for s in sums) and bool(steady_ms),
        infrastructure=any(bool(s.get("infrastructure")) for s in sums),
        capture_iteration=sums[0].get("capture_iteration"),  # the first segment's, in the continued numbering
        files=[f for s in sums for f in s.get("files", [])],
        notes=[f"{l}: {n}" for l, s in zip(labels, sums) for n in s.get("notes", [])],
        segments=labels,
    )
    for key in ("step_ms_median", "step_ms_mean", "step_ms_p10", "step_ms_p90"):
        summary[key] = None
    if steady_ms and summary["measurement_usable"]:
        x = np.asarray(steady_ms, dtype=float)
        summary.update(step_ms_median=float(np.median(x)), step_ms_mean=float(np.mean(x)),
                       step_ms_p10=float(np.percentile(x, 10)), step_ms_p90=float(np.percentile(x, 90)))  # fmt: skip
    wall = sum(float(seg.wall_s or 0.0) for seg, _ in parsed)
    return ArmOfPair(run_id, arm, labels, summary, iterations, wall_s=wall, segment_summaries=sums)


def split_cost(arms: Sequence[ArmOfPair], job_wall_s: float, gpus: int) -> None:
    """The job's GPU-seconds, split between its arms: each arm its segments' wall time, plus half of the rest
    (the job's own start, teardown); the two add up to the job's GPUs x wall time exactly."""
    seg_total = sum(a.wall_s for a in arms)
    overhead = max(0.0, job_wall_s - seg_total)
    scale = 1.0 if seg_total <= job_wall_s or seg_total == 0 else job_wall_s / seg_total
    for a in arms:
        a.wall_s = round(a.wall_s * scale + overhead / len(arms), 3)
        a.gpu_seconds = round(gpus * a.wall_s, 3)


def segment_record(seg: Segment, summary: Mapping[str, Any]) -> dict[str, Any]:
    return {**asdict(seg), "text": None, "outcome": summary.get("outcome"), "steady_n": summary.get("steady_n"),
            "step_ms_median": _nan_to_none(summary.get("step_ms_median"))}  # fmt: skip
