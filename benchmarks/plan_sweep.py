"""How long does Snakemake take to plan a large sweep? Prints the seconds of `snakemake -n` for an N-cell sweep.

    python benchmarks/plan_sweep.py --cells 1000        # target on a 2-core machine: < 20 s

The spec is the builtin workload with 250 shapes x 4 graph variants (repeats 2): 1,000 cells, 2,500 runs,
and about 5,000 jobs in the DAG (run and parse per run; the plan job writes every config.yaml).
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


def spec(cells: int) -> dict:
    shapes = max(1, cells // 4)
    hidden = [64 * (i + 1) for i in range(max(1, shapes // 5))]
    return {
        "sweep": f"plan-{cells}",
        "workload": {"kind": "builtin"},
        "axes": {"hidden": hidden, "micro_batch": [1, 2, 4, 8, 16]},
        "fixed": {"layers": 2, "heads": 4, "seq_length": 64},
        "variants": [
            {"impl": "full_iteration"},
            {"impl": "transformer_engine", "scope": ["attn"]},
            {"impl": "transformer_engine", "scope": ["mlp"]},
            {"impl": "transformer_engine", "scope": ["attn", "mlp"]},
        ],
        "repeats": 2,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.yaml"
        raw = spec(args.cells)
        path.write_text(yaml.safe_dump(raw))
        (Path(tmp) / "configs").mkdir()
        (Path(tmp) / "configs" / "config.yaml").write_text(yaml.safe_dump({"spec": str(path)}))
        cmd = [sys.executable, "-m", "snakemake", "-n", "-q", "--cores", "2", "--snakefile", str(ROOT / "Snakefile"),
               "--directory", tmp]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
            return 1
        n_cells = len(raw["axes"]["hidden"]) * 5 * 4
        print(f"cells: {n_cells}  runs: {n_cells // 4 * 5 * 2}")
        print(f"snakemake -n: {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
