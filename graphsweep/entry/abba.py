"""The pair job's driver, inside the job: the segments of one ABBA pair, one training process after another.

    python -m graphsweep.entry.abba --order A1,B1,B2,A2 --plans JSON [--arms eager,graph] [--slurm JSON]
        [--segments-dir DIR]

Each segment's output goes to the job's combined log between marker lines (graphsweep/logformat.py; and to
DIR/{label}.log when given); the controller splits the combined log back into segments (graphsweep/parse/pairs.py),
so the workflow needs no path known only inside the job. The plan side is graphsweep/workloads/paired.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from graphsweep import logformat as lf
from graphsweep.entry.job import job_argv, own_interpreter
from graphsweep.records import LaunchPlan
from graphsweep.vocab import ABBA_DRIVER, GRAPH


def _segment_argv(plan: LaunchPlan, slurm: Mapping[str, Any] | None) -> list[str]:
    return own_interpreter(job_argv(plan, slurm or {}))  # the same srun / container wrapping as an unpaired run


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
        print(lf.segment_start(label, arm, shlex.join(argv)), file=out, flush=True)
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
            print(lf.abba_launch_error(str(exc)), file=out, flush=True)
            code = 127
        wall = time.monotonic() - t0
        print(lf.segment_end(label, arm, code, wall), file=out, flush=True)
        records.append({"label": label, "arm": arm, "exit_code": code, "wall_s": round(wall, 3)})
    codes = [r["exit_code"] for r in records]
    print(lf.pair_done(",".join(order), ",".join(map(str, codes))), file=out, flush=True)
    return records


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m {ABBA_DRIVER}", description=__doc__.split("\n\n")[0])
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
        print(f"{ABBA_DRIVER}: --order {args.order!r}: labels are A<n> or B<n> (A = eager arm), not {bad}",
              file=sys.stderr)
        return 2
    raw = json.loads(args.plans)
    plans = {k: LaunchPlan.from_dict(raw[k]) for k in ("A", "B")}
    a, b = (args.arms.split(",") + [GRAPH])[:2]
    slurm = json.loads(args.slurm) if args.slurm else None
    records = run_pair(plans, order, {"A": a, "B": b}, slurm, args.segments_dir)
    # the job's exit code: the first segment that failed (the per-segment codes are in the log markers)
    return next((r["exit_code"] for r in records if r["exit_code"] != 0), 0)


if __name__ == "__main__":
    sys.exit(main())
