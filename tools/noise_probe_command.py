"""The command of tools/noise_probe.py for a sweep's eager run (device side, before the sweep):

    python tools/noise_probe_command.py SPEC [--iterations N] [--block B]    -> one shell line on stdout

The eager run of the spec's first shape, repeat 1, with N measured iterations and without the spec's `quiet`
settings (the probe switches the garbage collector and CPU affinity itself, block by block); GRAPHSWEEP_PIN_CPUS=1
so that the entry knows where a pinned block puts each thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphsweep.entry.affinity import ENV as PIN_CPUS_ENV  # noqa: E402
from graphsweep.sweepspec.load import load_spec  # noqa: E402
from graphsweep.vocab import PYTHON  # noqa: E402
from graphsweep.workloads.registry import launch_plan  # noqa: E402

ENTRY = "graphsweep/entry/megatron_entry.py"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("--iterations", type=int, default=96)
    ap.add_argument("--block", type=int, default=8)
    args = ap.parse_args()
    run = next(r for r in load_spec(args.spec).runs() if r.arm == "eager" and r.repeat == 1)
    run = dataclasses.replace(run, iterations=args.iterations, quiet={})
    plan = launch_plan(run)
    at = next(i for i, a in enumerate(plan.argv) if a.endswith(ENTRY))
    argv = [*plan.argv[:at], str(Path(__file__).resolve().parent / "noise_probe.py"), "--block", str(args.block),
            *plan.argv[at + 1:]]
    if argv[0] == PYTHON:  # the plan's "python" is the job's interpreter (run/job.py): here, this one
        argv[0] = sys.executable
    env = {**plan.env, PIN_CPUS_ENV: "1"}
    print(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
