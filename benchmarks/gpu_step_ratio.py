"""How close is the builtin full-iteration graph step to the GPU's own time for that step?

For one shape of the builtin workload (graphsweep/entry/builtin_gpt.py), measure on a CUDA device:
  * eager step wall time (synchronize, perf_counter) and its kernel busy time (torch.profiler);
  * full-iteration graph step wall time, the GPU span of one replay (CUDA events around it) and
    the kernel busy time of one replay (torch.profiler, kernel durations summed);
and print the ratios. A graph step near 1.0x of its GPU time means the host is out of the way;
eager wall / kernel busy is how launch-bound the eager baseline is (what a graph can win at most).

    python benchmarks/gpu_step_ratio.py --hidden 1024 --layers 8 --heads 16 --seq-length 512 --micro-batch 2

Needs CUDA: without it, it exits 3 with one line on stderr.

Seen on one H200 (torch 2.11.0+cu130, 2026-11-30), the shape above, 30 steps each: eager wall 16.7 ms,
eager kernel busy 10.2 ms (1.64x); graph wall 6.53 ms, graph GPU span 6.51 ms (1.003x), graph kernel
busy 6.15 ms (1.06x); eager / graph 2.56x.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from graphsweep.entry import builtin_gpt as workload  # noqa: E402
from graphsweep.entry import gpu_busy  # noqa: E402


def wall_ms(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def event_ms(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end))
    return out


def kernel_busy_ms(fn: Callable[[], object], n: int) -> float | None:
    """GPU busy time per call: the union of the kernel, memcpy and memset intervals (overlapping streams once, the
    annotations' spans left out), as the eager arm's own diagnostic measures it (graphsweep/entry/gpu_busy.py).
    Until 2026-12-01 this summed every CUDA-side profiler event with CPU activity on, annotations included: it
    overcounted (benchmarks/data/h200-2026-12-01/gpu_step_ratio.txt is that older figure)."""
    torch.cuda.synchronize()
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
    prof.start()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    prof.stop()
    busy_ns = gpu_busy.union_ns(gpu_busy.device_spans(prof.profiler.kineto_results.events()))
    return busy_ns / 1e6 / n if busy_ns > 0 else None


def build(cfg: workload.WorkloadConfig, dtype: torch.dtype, capturable: bool) -> Callable[[], object]:
    torch.manual_seed(cfg.seed)
    model = workload.GPT(cfg.vocab, cfg.hidden, cfg.heads, cfg.layers, cfg.seq_length).cuda().to(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=workload.LR, capturable=capturable)
    tokens = torch.randint(0, cfg.vocab, (cfg.micro_batch, cfg.seq_length), device="cuda")
    labels = torch.randint(0, cfg.vocab, (cfg.micro_batch, cfg.seq_length), device="cuda")
    return lambda: workload.train_step(model, opt, tokens, labels)


def fmt(x: float | None, suffix: str = "") -> str:
    return "n/a" if x is None else f"{x:.3f}{suffix}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("--hidden", "--layers", "--heads", "--seq-length", "--micro-batch"):
        p.add_argument(name, type=int, required=True)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--warmup", type=int, default=3, help="eager side-stream steps before capture")
    p.add_argument("--steps", type=int, default=50, help="measured steps per figure")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("[gpu_step_ratio] needs a CUDA device (torch.cuda.is_available() is False); run it on a GPU node",
              file=sys.stderr)
        return 3
    cfg = workload.parse_config([
        "--hidden", str(a.hidden), "--layers", str(a.layers), "--heads", str(a.heads), "--seq-length",
        str(a.seq_length), "--micro-batch", str(a.micro_batch), "--vocab", str(a.vocab), "--iters", "1"])
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
    print(f"shape: hidden={a.hidden} layers={a.layers} heads={a.heads} seq_length={a.seq_length} "
          f"micro_batch={a.micro_batch} vocab={a.vocab} dtype={a.dtype} steps={a.steps}")
    print(f"device: {torch.cuda.get_device_name()} torch {torch.__version__} cuda {torch.version.cuda}")

    eager = build(cfg, dtype, capturable=False)
    wall_ms(eager, 5)  # cuBLAS/allocator warm-up, not measured
    eager_wall = statistics.median(wall_ms(eager, a.steps))
    eager_busy = kernel_busy_ms(eager, a.steps)
    del eager
    torch.cuda.empty_cache()

    step = build(cfg, dtype, capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # the same side-stream warm-up as the workload's full_iteration arm
        for _ in range(a.warmup):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph, _ = workload.capture_full_iteration(step)
    wall_ms(graph.replay, 5)
    graph_wall = statistics.median(wall_ms(graph.replay, a.steps))
    graph_span = statistics.median(event_ms(graph.replay, a.steps))
    graph_busy = kernel_busy_ms(graph.replay, a.steps)

    print(f"eager wall per step, median (ms): {eager_wall:.3f}")
    print(f"eager kernel busy per step, profiler (ms): {fmt(eager_busy)}")
    print(f"graph wall per step, median (ms): {graph_wall:.3f}")
    print(f"graph GPU span per replay, CUDA events median (ms): {graph_span:.3f}")
    print(f"graph kernel busy per replay, profiler (ms): {fmt(graph_busy)}")
    print(f"ratio graph wall / graph GPU span: {graph_wall / graph_span:.3f}")
    print(f"ratio graph wall / graph kernel busy: {fmt(graph_busy and graph_wall / graph_busy)}")
    print(f"ratio eager wall / eager kernel busy: {fmt(eager_busy and eager_wall / eager_busy)}")
    print(f"ratio eager wall / graph wall (speedup): {eager_wall / graph_wall:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
