"""Wall time of the default sweep end to end (`snakemake --cores 2` in a fresh directory), and its parts.

    python benchmarks/default_sweep.py       # target on a 2-core machine: < 3 min

Prints the total, the number of jobs, and the median wall time of one run's job (from run.json).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(ROOT / "configs", Path(tmp) / "configs")
        cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile", str(ROOT / "Snakefile"), "--directory", tmp]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        total = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        runs = [json.loads(p.read_text()) for p in Path(tmp).glob("results/default/runs/*/run.json")]
        walls = [r["wall_s"] for r in runs]
        print(f"default sweep: {total:.1f} s end to end, {len(runs)} runs")
        print(f"one run's job (submitit local, inside): median {statistics.median(walls):.2f} s, max {max(walls):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
