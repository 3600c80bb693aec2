"""What the noise probe (tools/noise_probe.py) measured: step time per condition of its 2 x 2 rotation (Python's
garbage collector on/off x the rank pinned or not), block by block, and how far the step drifted over the job.

    .venv/bin/python benchmarks/noise_probe_report.py benchmarks/data/h200-moe-quiet/noise-probe.log

Per condition: the blocks it had, the median of its iterations' step times, the median of its blocks' medians, and
the within-block spread (median over its blocks of the coefficient of variation of the block's iterations). Then the
job's drift: the median step of each quarter of the blocks. The first block's first two iterations are start-up
(iteration 1 holds the initialisation; 2 warms the allocator) and are left out, and so is each block's first
iteration, where the probe switches (a "gc off" block starts with one full collection, as train.manual_gc does):
its median is printed apart, per condition. Iteration lines are Megatron
Bridge's (`iteration N/ M | ... elapsed time per iteration (ms): X |`, megatron/bridge/training/utils/train_utils.py
training_log).
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

BLOCK = re.compile(r"\[noise-probe\] block (\d+) from iteration (\d+): gc (on|off), (pinned|not pinned)")
ITERATION = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): ([0-9.]+)")
SKIP = 2  # start-up iterations


def read(path: Path) -> list[tuple[str, float | None, list[float]]]:
    """(condition, its first iteration's step time, the step times of its other iterations) per block, in order."""
    starts, steps = [], {}
    for line in path.read_text(errors="replace").splitlines():
        if m := BLOCK.search(line):
            starts.append((int(m.group(2)), f"gc {m.group(3)}, {m.group(4)}"))
        elif m := ITERATION.search(line):
            steps[int(m.group(1))] = float(m.group(2))
    blocks = []
    for i, (first, condition) in enumerate(starts):
        last = starts[i + 1][0] if i + 1 < len(starts) else max(steps) + 1
        ms = [steps[k] for k in range(max(first + 1, SKIP + 1), last) if k in steps]
        if ms:
            blocks.append((condition, steps.get(first) if first > SKIP else None, ms))
    return blocks


def main(argv: list[str]) -> int:
    blocks = read(Path(argv[0]))
    print(f"# {argv[0]}: {len(blocks)} blocks, {sum(len(b) for _, _, b in blocks)} iterations after each block's first\n")
    print("| condition | blocks | median step ms | median of block medians | within-block CV (median) | a block's first "
          "iteration (median) |")
    print("|---|---:|---:|---:|---:|---:|")
    for condition in sorted({c for c, _, _ in blocks}):
        mine = [ms for c, _, ms in blocks if c == condition]
        firsts = [f for c, f, _ in blocks if c == condition and f is not None]
        cvs = [statistics.stdev(ms) / statistics.mean(ms) for ms in mine if len(ms) > 1]
        first = f"{statistics.median(firsts):.1f}" if firsts else "-"
        print(f"| {condition} | {len(mine)} | {statistics.median([x for ms in mine for x in ms]):.1f} | "
              f"{statistics.median([statistics.median(ms) for ms in mine]):.1f} | {statistics.median(cvs):.1%} | {first} |")
    quarter = max(1, len(blocks) // 4)
    drift = [statistics.median([x for _, _, ms in blocks[i:i + quarter] for x in ms])
             for i in range(0, len(blocks), quarter)]
    print(f"\ndrift over the job (median step of each quarter of the blocks): {', '.join(f'{d:.1f}' for d in drift)} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
