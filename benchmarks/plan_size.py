"""What a sweep's size costs Snakemake: wall time and peak memory of `snakemake -n` for N planned runs.

The builtin workload, one axis of N/2 micro-batch values, one graph variant, one repeat (N runs: N/2 eager
baselines and N/2 graph runs; each run is two jobs: run and parse; the plan job writes its config.yaml). `max_runs` in the spec schema stays
below where this falls over; sweepspec/load.py SNAKEMAKE_COST quotes the per-run figure.

    .venv/bin/python benchmarks/plan_size.py 2000 5000 10000 20000
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def measure(runs: int, timeout_s: float) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"sweep": f"size{runs}", "workload": {"kind": "builtin"},
                "axes": {"micro_batch": list(range(1, runs // 2 + 1))},
                "fixed": {"hidden": 64, "layers": 1, "heads": 4, "seq_length": 16, "vocab": 64},
                "variants": [{"impl": "full_iteration"}], "repeats": 1, "iterations": 5,
                "max_runs": runs, "budget_gpu_hours": 1e9,
                "executor": {"cluster": "slurm", "timeout_min": 10}}  # fmt: skip
        (Path(tmp) / "configs").mkdir()
        (Path(tmp) / "configs" / "size.yaml").write_text(yaml.safe_dump(spec))
        (Path(tmp) / "configs" / "config.yaml").write_text(yaml.safe_dump({"spec": "configs/size.yaml"}))
        cmd = ["/usr/bin/time", "-f", "%e s %M KB", sys.executable, "-m", "snakemake", "--snakefile",
               str(ROOT / "Snakefile"), "--directory", tmp, "-n", "--cores", "1", "--quiet", "all"]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"{runs} runs: still planning after {timeout_s:.0f} s"
        wall = time.monotonic() - t0
        tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        peak_kb = int(tail.split()[2]) if tail.endswith("KB") else 0
        ok = "ok" if proc.returncode == 0 else f"rc {proc.returncode}"
        return f"{runs} runs: {ok}, {wall:.0f} s, peak {peak_kb / 1024 / 1024:.2f} GB ({peak_kb / runs:.0f} KB a run)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", type=int, nargs="+")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args()
    for n in args.runs:
        print(measure(n, args.timeout), flush=True)


if __name__ == "__main__":
    main()
