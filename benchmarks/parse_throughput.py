"""Parse throughput on a >= 500 MB log built from real lines, side by side with grep.

    .venv/bin/python benchmarks/parse_throughput.py [--mb 500] [--keep DIR]

The log is the setup of tests/fixtures/logs/megatron-h200/te_attn.log, then its real training-loop lines
repeated with renumbered iterations (Step Time + iteration line per iteration, a memory line, a warning
and its source line every 100 iterations: the shape of a long Bridge run with log_interval=1), then the
real end. Prints MB/s of graphsweep.parse.parse_run (one process, Arrow limited to one thread) by wall time and by
the process's CPU time (on a shared machine the wall time includes waiting for a core; the CPU time does not), its
peak RSS (measured in a child process so the figures are the parser's), and `grep -c 'elapsed time per iteration'`
on the same file. `--repeat N` parses N times in the child and reports the fastest. The file is deleted unless --keep
is given. docs/performance.md keeps the figures with the command that printed them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests/fixtures/logs/megatron-h200/te_attn.log"

CHILD = r"""
import json, resource, sys, time
import pyarrow as pa
pa.set_cpu_count(1); pa.set_io_thread_count(1)
from graphsweep.parse.run import parse_run
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
dt = cpu = float("inf")
for _ in range(int(sys.argv[2])):
    t, c = time.perf_counter(), time.process_time()
    r = parse_run([sys.argv[1]], arm="graph", warmup=3)
    dt, cpu = min(dt, time.perf_counter() - t), min(cpu, time.process_time() - c)
print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "rows": len(r.iterations), "outcome": r.summary.outcome,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "import_rss_mb": base / 1024}))
"""


def build(path: Path, mb: int) -> int:
    lines = SOURCE.read_bytes().split(b"\n")
    start = next(i for i, l in enumerate(lines) if l.startswith(b"Starting training loop"))
    head = b"\n".join(lines[: start + 1]) + b"\n"
    it = next(l for l in lines if b"iteration        5/" in l)
    step = next(l for l in lines if l.startswith(b"Step Time : 0.04s"))
    mem = next(l for l in lines if b") memory (GB)" in l)
    warn = next(l for l in lines if b"UserWarning: The AccumulateGrad" in l)
    warn_src = b"  Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass"
    end = b"Deleting CUDA graphs\n[after training is done] datetime: 2026-11-30 09:19:42 \n"
    per_iter = len(step) + len(it) + 2
    total_iters = (mb * 1_000_000 - len(head)) // per_iter + 1
    template = re.sub(rb"iteration +\d+/ +\d+", b"iteration " + b"%8d/" + b"%8d" % total_iters, it)
    written = 0
    with open(path, "wb") as f:
        f.write(head)
        written += len(head)
        buf: list[bytes] = []
        for i in range(1, total_iters + 1):
            if i == 4:
                buf.append(b"INFO:megatron.core.transformer.cuda_graphs:Start CUDA Graphs capture...\n"
                           b"INFO:megatron.core.transformer.cuda_graphs:Time spent in CUDA Graphs capture on rank 0: "
                           b"0.58s\n")
            buf.append(step + b"\n" + (template % i) + b"\n")
            if i % 100 == 0:
                buf.append(mem.replace(b"(after 1 iterations)", b"(after %d iterations)" % i) + b"\n"
                           + warn + b"\n" + warn_src + b"\n")
            if len(buf) >= 20000:
                chunk = b"".join(buf)
                f.write(chunk)
                written += len(chunk)
                buf = []
        chunk = b"".join(buf) + end
        f.write(chunk)
        written += len(chunk)
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--keep", type=Path, default=None, help="write the log here and keep it")
    ap.add_argument("--repeat", type=int, default=1, help="parse this many times, report the fastest")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="graphsweep-bench-"))
    path = (a.keep or tmp) / f"bench-{a.mb}mb.log"
    try:
        size = build(path, a.mb)
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        t = time.perf_counter()
        g = subprocess.run(["grep", "-c", "elapsed time per iteration", str(path)], capture_output=True, text=True)
        grep_s = time.perf_counter() - t
        out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(a.repeat)], capture_output=True, text=True,
                             cwd=ROOT, check=True)
        r = json.loads(out.stdout)
        mb = size / 1e6
        print(f"log: {mb:.0f} MB, {int(g.stdout)} iteration lines ({path})")
        print(f"grep -c 'elapsed time per iteration': {grep_s:.3f} s ({mb / grep_s:.0f} MB/s)")
        print(f"graphsweep parse_run: {r['seconds']:.2f} s ({mb / r['seconds']:.0f} MB/s), CPU {r['cpu_seconds']:.2f} s "
              f"({mb / r['cpu_seconds']:.0f} MB/s), {r['rows']} rows, outcome {r['outcome']}, "
              f"{r['seconds'] / grep_s:.1f}x grep")
        print(f"peak RSS {r['rss_mb']:.0f} MB (after imports {r['import_rss_mb']:.0f} MB); "
              f"rows take {r['rows'] * 11 * 8 / 1e6:.0f} MB as float64/int64 columns")
        ok_speed = mb / r["seconds"] >= 100  # wall time, as a user waits for it
        ok_grep = r["seconds"] <= 5 * grep_s
        print(f"targets: >= 100 MB/s {'met' if ok_speed else 'MISSED'}; <= 5x grep {'met' if ok_grep else 'MISSED'}")
    finally:
        if a.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
