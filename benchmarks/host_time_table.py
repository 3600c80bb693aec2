"""Where the eager step's host time goes, per region, from eager logs' `[graphsweep] host time:` lines, and what each
graph scope would leave by the estimate of graphsweep/entry/host_time.py (scope_estimate).

    .venv/bin/python benchmarks/host_time_table.py LOG... [--scopes attn,moe_router,moe_preprocess ...]

Per log: the profiled window's figures, the steady step (median of the iterations after warmup+1 the log prints),
each region's share of it (the profiler's per-event cost taken off where the line gives events), and per scope set
the estimated step and speedup.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from graphsweep import logformat as lf
from graphsweep.entry import gpu_busy, host_time

ITERATION = re.compile(rb"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): ([\d.]+)")
CAPTURE_AT = re.compile(rb"cuda_graph_warmup_steps=(\d+)")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--scopes", action="append", default=None,
                    help="comma list of graph scopes (repeatable); default: the 128-expert MoE sweep's variants")
    a = ap.parse_args(argv)
    scope_sets = [s.split(",") for s in (a.scopes or ["attn", "attn,moe_router,moe_preprocess",
                                                       "moe_router,moe_preprocess", "moe", "full_iteration"])]
    for log in a.logs:
        raw = log.read_bytes()
        m, busy = lf.RE_HOST_TIME.search(raw), lf.RE_GPU_BUSY.search(raw)
        if m is None:
            print(f"{log}: no host-time line")
            continue
        warmup = int(CAPTURE_AT.search(raw).group(1)) if CAPTURE_AT.search(raw) else 3
        steady = statistics.median(float(v) for i, v in ITERATION.findall(raw) if int(i) >= warmup + 2)
        regions = {k.decode(): (float(ms), float(w) if w else None, float(e) if e else None)
                   for k, ms, w, e in lf.RE_HOST_REGION.findall(m.group(5))}
        window = float(m.group(4))
        shares = host_time.steady_shares(regions, window, steady)
        busy_ms = float(busy.group(4)) if busy else None
        corrected = all(e is not None for _, _, e in regions.values())
        print(f"{log}: window {window:.1f} ms per iteration, steady step {steady:.1f} ms, GPU busy "
              f"{busy_ms if busy_ms is None else round(busy_ms, 1)} ms"
              f" (shares {'of the steady step, profiler cost per event taken off' if corrected else 'of the window'})")
        print("| region | window ms | waiting on the GPU ms | events | share |")
        print("|---|---:|---:|---:|---:|")
        for r, (ms, wait, ev) in regions.items():
            print(f"| {r} | {ms:.1f} | {'—' if wait is None else f'{wait:.2f}'} | {'—' if ev is None else f'{ev:.0f}'} "
                  f"| {shares.get(r, 0):.1%} |")
        for scopes in scope_sets:
            est = host_time.scope_estimate(steady, busy_ms, shares, scopes)
            covered = sum(shares.get(r, 0) for r in host_time.covered_regions(scopes))
            print(f"  {'+'.join(scopes)}: covers {covered:.1%} of the host time; estimated step {est:.1f} ms "
                  f"({steady / est:.2f}x)")
        if busy_ms:
            print(f"  ceiling (any graph): {gpu_busy.launch_bound(busy_ms, steady)[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
