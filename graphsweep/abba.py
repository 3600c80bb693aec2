"""Paired runs: both arms of a cell in one job on the same GPUs, in ABBA order (spec `pairing: true`).

A pair job runs four segments, each a complete training process: A = the eager arm, B = the graph arm (or the
eager control of an A/A cell). Odd repeats run A1 B1 B2 A2, even repeats B1 A1 A2 B2: ABBA cancels a linear drift
within the job (thermal, clocks, a neighbour's load), and alternating the order across repeats cancels what the
first segment of a job pays alone (cold page cache, compile caches, the container's first start).

Driver (inside the job): `python -m graphsweep.abba --order A1,B1,B2,A2 --plans JSON [--slurm JSON]
[--segments-dir DIR]` runs the segments one after another; each segment's output goes to the job's combined log
between marker lines (and to DIR/{label}.log when given). The controller side splits the combined log back into
segments (`split_segments`), so the workflow needs no path known only inside the job.

Measurement: each arm becomes one "virtual run" per job (`{cell_id}.pair.r{k}.eager` / `.graph`): its steady
iterations are those of its two segments' steady windows together, its outcome the worse of the two. The cell's
interval then comes from the per-job log-ratios (stats.judge_cell(paired=True)), free of node-to-node variance.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from graphsweep.launch import LaunchPlan

MODULE = "graphsweep.abba"
ORDERS = {1: ("A1", "B1", "B2", "A2"), 0: ("B1", "A1", "A2", "B2")}  # by repeat parity
MARK = "[graphsweep abba]"
_START = re.compile(r"\[graphsweep abba\] segment (?P<label>[AB]\d) \((?P<arm>\w+)\) start")
_END = re.compile(
    r"\[graphsweep abba\] segment (?P<label>[AB]\d) \((?P<arm>\w+)\) end: exit (?P<exit>-?\d+), wall (?P<wall>[\d.]+) s"
)
# The worse outcome of two segments names the arm (a graph arm that OOMs once is an OOM arm).
_SEVERITY = ["completed", "timeout", "unparseable", "crashed", "invalid", "oom", "blocked"]


def order_for(repeat: int) -> tuple[str, ...]:
    return ORDERS[repeat % 2]


# --------------------------------------------------------------------------------------------------
# Plan side


def _plan_dict(plan: LaunchPlan) -> dict[str, Any]:
    return {"argv": list(plan.argv), "env": dict(plan.env), "srun": plan.srun, "srun_args": list(plan.srun_args),
            "gpus": plan.gpus, "nodes": plan.nodes, "gpus_per_node": plan.gpus_per_node,
            "tasks_per_node": plan.tasks_per_node}  # fmt: skip


def _plan_of(d: Mapping[str, Any]) -> LaunchPlan:
    keys = ("argv", "env", "srun", "srun_args", "gpus", "nodes", "gpus_per_node", "tasks_per_node")
    return LaunchPlan(**{k: d[k] for k in keys if k in d})


def pair_plan(
    eager: LaunchPlan,
    other: LaunchPlan,
    repeat: int,
    arms: tuple[str, str] = ("eager", "graph"),
    python: str | None = None,
) -> LaunchPlan:
    """The pair job's plan: the driver as the command, the allocation of the arms (they share one layout)."""
    layout = lambda p: (p.nodes, p.gpus_per_node, p.tasks_per_node)  # noqa: E731
    if layout(eager) != layout(other):
        raise ValueError("pairing: the eager and graph arms need the same GPU layout to share one allocation")
    plans = json.dumps({"A": _plan_dict(eager), "B": _plan_dict(other)}, sort_keys=True)
    argv = [python or sys.executable, "-m", MODULE, "--order", ",".join(order_for(repeat)), "--arms", ",".join(arms),
            "--plans", plans]
    # srun as the arms have it: the allocation then gets one task per GPU and the driver runs in the batch step
    # (submit.slurm_parameters); the driver starts each segment as its own srun step (submit.job_argv)
    return LaunchPlan(argv=argv, env=dict(eager.env), gpus=eager.gpus, nodes=eager.nodes,
                      gpus_per_node=eager.gpus_per_node, tasks_per_node=eager.tasks_per_node,
                      overrides=dict(other.overrides), srun=eager.srun, srun_args=[])  # fmt: skip


def is_pair_plan(plan: LaunchPlan) -> bool:
    return len(plan.argv) >= 3 and plan.argv[1] == "-m" and plan.argv[2] == MODULE


def job_argv(plan: LaunchPlan, slurm: Mapping[str, Any]) -> list[str]:
    """The driver command inside the job: the profile's Slurm settings travel along (container flags per segment)."""
    return [*plan.argv, "--slurm", json.dumps(dict(slurm or {}), sort_keys=True, default=str)]


def shell(plan: LaunchPlan) -> str:
    """A readable command for the plan table: the segment order and both arms' commands."""
    args = _parse_args(plan.argv[3:])
    plans = json.loads(args.plans)
    arms = " ; ".join(f"{arm}: {_plan_of(plans[arm]).shell()}" for arm in ("A", "B"))
    return f"{shlex.join(plan.argv[:3])} --order {args.order} --arms {args.arms} [{arms}]"


# --------------------------------------------------------------------------------------------------
# Job side: the driver


def _segment_argv(plan: LaunchPlan, slurm: Mapping[str, Any] | None) -> list[str]:
    from graphsweep.submit import job_argv as arm_argv  # the same srun / container wrapping as an unpaired run

    return arm_argv(plan, slurm or {})


def run_pair(
    plans: Mapping[str, LaunchPlan],
    order: Sequence[str],
    arm_names: Mapping[str, str],
    slurm: Mapping[str, Any] | None = None,
    segments_dir: Path | None = None,
    out: Any = None,
) -> list[dict[str, Any]]:
    """Run the segments in order; returns one record per segment (label, arm, exit code, wall seconds)."""
    out = out or sys.stdout
    child: list[subprocess.Popen] = []

    def forward(signum: int, frame: Any) -> None:  # noqa: ARG001 - Slurm/submitit stop the job: stop the segment too
        for p in child:
            if p.poll() is None:
                p.send_signal(signum)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
        signal.signal(sig, forward)
    records = []
    for label in order:
        plan = plans[label[0]]
        arm = arm_names[label[0]]
        argv = _segment_argv(plan, slurm)
        env = {**os.environ, **{k: str(v) for k, v in plan.env.items()}}
        print(f"{MARK} segment {label} ({arm}) start: {shlex.join(argv)}", file=out, flush=True)
        t0 = time.monotonic()
        try:
            if segments_dir is None:
                proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
                child[:] = [proc]
                code = proc.wait()
            else:
                segments_dir.mkdir(parents=True, exist_ok=True)
                with open(segments_dir / f"{label}.log", "wb") as seg:
                    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                    child[:] = [proc]
                    assert proc.stdout is not None
                    for line in proc.stdout:  # tee: the segment's own log and the job's combined log
                        seg.write(line)
                        if hasattr(out, "buffer"):
                            out.buffer.write(line)
                        else:
                            out.write(line.decode(errors="replace"))
                    out.flush()
                    code = proc.wait()
        except OSError as exc:  # command not found: a result of that segment, like job_main's launch error
            print(f"{MARK} launch error: {exc}", file=out, flush=True)
            code = 127
        wall = time.monotonic() - t0
        print(f"{MARK} segment {label} ({arm}) end: exit {code}, wall {wall:.3f} s", file=out, flush=True)
        records.append({"label": label, "arm": arm, "exit_code": code, "wall_s": round(wall, 3)})
    codes = [r["exit_code"] for r in records]
    print(f"{MARK} pair done: order {','.join(order)}; exits {','.join(map(str, codes))}", file=out, flush=True)
    return records


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    p.add_argument("--order", required=True, help="segment labels, e.g. A1,B1,B2,A2 (A = eager arm, B = graph arm)")
    p.add_argument("--plans", required=True, help='JSON {"A": plan, "B": plan}; a plan has argv, env, srun, srun_args')
    p.add_argument("--arms", default="eager,graph", help="names of arm A and arm B in the log markers")
    p.add_argument("--slurm", default=None, help="JSON of the profile's slurm settings (container flags per segment)")
    p.add_argument("--segments-dir", type=Path, default=None, help="also write each segment's output to DIR/LABEL.log")
    return p.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    order = [x.strip() for x in args.order.split(",") if x.strip()]
    bad = [x for x in order if not re.fullmatch(r"[AB]\d", x)]
    if bad:
        print(f"{MODULE}: --order {args.order!r}: labels are A<n> or B<n> (A = eager arm), not {bad}", file=sys.stderr)
        return 2
    raw = json.loads(args.plans)
    plans = {k: _plan_of(raw[k]) for k in ("A", "B")}
    a, b = (args.arms.split(",") + ["graph"])[:2]
    slurm = json.loads(args.slurm) if args.slurm else None
    records = run_pair(plans, order, {"A": a, "B": b}, slurm, args.segments_dir)
    # the job's exit code: the first segment that failed (the per-segment codes are in the log markers)
    return next((r["exit_code"] for r in records if r["exit_code"] != 0), 0)


# --------------------------------------------------------------------------------------------------
# Controller side: segments of a combined log


@dataclass
class Segment:
    label: str  # A1, B1, ...
    arm: str  # eager | graph | control
    text: str
    exit_code: int | None = None  # None: no end marker (the job died inside this segment)
    wall_s: float | None = None


def split_segments(text: str) -> list[Segment]:
    """The segments of a pair job's combined log, in the order they ran."""
    segments: list[Segment] = []
    current: Segment | None = None
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if MARK in line:
            if m := _START.search(line):
                if current is not None:  # started without an end: the previous one never finished
                    current.text = "".join(lines)
                current, lines = Segment(m["label"], m["arm"], ""), []
                segments.append(current)
                continue
            if (m := _END.search(line)) and current is not None and m["label"] == current.label:
                current.text, current.exit_code, current.wall_s = "".join(lines), int(m["exit"]), float(m["wall"])
                current, lines = None, []
                continue
        if current is not None:
            lines.append(line)
    if current is not None:
        current.text = "".join(lines)
    return segments


def worse_outcome(outcomes: Sequence[str]) -> str:
    """The arm's outcome from its segments': infrastructure first, then blocked > oom > invalid > crashed > ..."""
    def rank(o: str) -> int:
        return _SEVERITY.index(o) if o in _SEVERITY else len(_SEVERITY)  # unknown: infrastructure, worst

    return max(outcomes, key=rank) if outcomes else "unparseable"


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
    import numpy as np
    import pandas as pd

    from graphsweep.parse import summary_to_dict

    if not parsed:  # the job never started this arm (driver failed, job killed before it)
        summary = {"outcome": "unparseable", "arm": arm, "steady_n": 0, "measurement_usable": False, "segments": [],
                   "reason": f"no {arm} segment in the pair job's log (the ABBA driver never started one)"}
        return ArmOfPair(run_id, arm, [], summary, pd.DataFrame({"run_id": pd.Series(dtype=str)}))
    frames, sums, offset, steady_ms = [], [], 0, []
    for seg, p in parsed:
        s = summary_to_dict(p.summary)
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
        steady_n=len(steady_ms) if outcome in ("completed", "timeout") else 0,
        steady_reason="; ".join(f"{l}: {s.get('steady_reason', '')}" for l, s in zip(labels, sums)),
        peak_mem_gb=max((s["peak_mem_gb"] for s in sums if s.get("peak_mem_gb") is not None), default=None),
        peak_mem_before_capture_gb=max(
            (s["peak_mem_before_capture_gb"] for s in sums if s.get("peak_mem_before_capture_gb") is not None),
            default=None,
        ),
        capture_seen=all(bool(s.get("capture_seen")) for s in sums),
        replay_seen=all(bool(s.get("replay_seen")) for s in sums),
        capture_s=max((s["capture_s"] for s in sums if s.get("capture_s") is not None), default=None),
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


if __name__ == "__main__":
    sys.exit(main())
