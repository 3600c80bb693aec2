"""The builtin workload: a small, real GPT trainer that speaks the Megatron Bridge log format.

Run inside each job as ``python -m graphsweep.entry.builtin_gpt ARGS`` (the controller side, which builds that
command and checks a spec's settings, is graphsweep/workloads/builtin.py). Three variants of one training step
(AdamW, clip-grad 1.0, the same math in every arm):

* ``eager``: plain steps, on CUDA when there is one, else on CPU with real timings;
* ``full_iteration``: ``torch.cuda.graph`` over forward + backward + clip + optimizer step
  (the analogue of MCore ``cuda_graph_impl=full_iteration``);
* ``scoped``: ``torch.cuda.make_graphed_callables`` on the attention and/or MLP sub-block of
  every layer (the analogue of TE scoped graphs, which are built on the same mechanism).

Log lines copy Megatron's own text, with their source in a comment, so one parser serves this
workload and Megatron Bridge. Nothing is faked: without CUDA a graph variant is ``blocked`` (exit 3).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from graphsweep import logformat as lf
from graphsweep import provenance
from graphsweep.entry import affinity
from graphsweep.entry import builtin_settings as settings
from graphsweep.entry import host_time
from graphsweep.entry.gpu_busy import BusyProbe
from graphsweep.vocab import EAGER
from torch import Tensor, nn

_START = time.perf_counter()  # "time to initialize" counts from import, like Megatron's from process start
VARIANTS = (EAGER, "full_iteration", "scoped")
SCOPES = settings.SCOPES  # names of Megatron's cuda_graph_modules that this model has
BLOCKED_EXIT = 3
LR = 1e-4
CLIP_GRAD = 1.0  # Megatron's default clip_grad; the norm it returns is the logged "grad norm"
N_BATCHES = 4  # distinct batches cycled through the static input buffers


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: Tensor) -> Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(a.transpose(1, 2).reshape(b, t, h))


class MLP(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(self.norm(x))))


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.attn = Attention(hidden, heads)
        self.mlp = MLP(hidden)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(x)  # the residual add stays eager, outside the scoped graphs
        return x + self.mlp(x)


class GPT(nn.Module):
    def __init__(self, vocab: int, hidden: int, heads: int, layers: int, seq_length: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.pos = nn.Parameter(torch.zeros(seq_length, hidden))
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.emb(tokens) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


@dataclass(frozen=True)
class WorkloadConfig:
    hidden: int
    layers: int
    heads: int
    seq_length: int
    micro_batch: int
    vocab: int
    variant: str
    scope: tuple[str, ...]
    warmup: int
    iters: int
    mem_fraction: float | None
    dtype: str | None
    device: str
    seed: int
    manual_gc: int | None = None  # spec quiet.manual_gc: collect every N iterations, the collector off otherwise


PINNING: affinity.Pinning | None = None  # spec quiet.pin_cpus (GRAPHSWEEP_PIN_CPUS): where this process's threads go


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {settings.TRAINER}", description=__doc__.split("\n\n")[0])
    for name in ("--hidden", "--layers", "--heads", "--seq-length", "--micro-batch"):
        p.add_argument(name, type=int, required=True)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--variant", choices=VARIANTS, default=EAGER)
    p.add_argument("--scope", default=None, help="comma list of attn, mlp; only with --variant scoped")
    p.add_argument("--warmup", type=int, default=3, help="cuda_graph_warmup_steps: eager iterations before capture")
    p.add_argument("--iters", type=int, required=True, help="total iterations, warmup and capture included")
    p.add_argument("--mem-fraction", type=float, default=None, help="torch.cuda.set_per_process_memory_fraction")
    p.add_argument("--dtype", choices=settings.DTYPES, default=None, help="default: bf16 on CUDA, fp32 on CPU")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--seed", type=int, default=1234)  # Megatron's default seed
    p.add_argument("--manual-gc", type=int, default=None, metavar="N",
                   help="Python's garbage collector off while training, collected every N iterations (0: never)")
    return p


def parse_config(argv: Sequence[str] | None = None) -> WorkloadConfig:
    """Parse and validate; a bad combination exits 2 with a message naming the flag and value."""
    p = build_parser()
    a = p.parse_args(argv)
    scope: tuple[str, ...] = ()
    if a.scope is not None:
        if a.variant != "scoped":
            p.error(f"--scope {a.scope!r} is only valid with --variant scoped (got --variant {a.variant})")
        names = [s.strip() for s in a.scope.split(",") if s.strip()]
        unknown = [s for s in names if s not in SCOPES]
        if unknown or not names:
            p.error(f"--scope {a.scope!r}: unknown name(s) {unknown}; use a comma list of {', '.join(SCOPES)}")
        scope = tuple(s for s in SCOPES if s in names)  # execution order, duplicates dropped
    elif a.variant == "scoped":
        p.error("--variant scoped needs --scope (attn, mlp or attn,mlp)")
    given = {"hidden": a.hidden, "layers": a.layers, "heads": a.heads, "seq_length": a.seq_length,
             "micro_batch": a.micro_batch, "vocab": a.vocab}
    if a.mem_fraction is not None:
        given["mem_fraction"] = a.mem_fraction
    for key, value in given.items():  # the same checks a spec's settings get (graphsweep/entry/builtin_settings.py)
        if problem := settings.setting_problem(key, value):
            p.error(f"--{key.replace('_', '-')}: {problem}")
    if problem := settings.shape_problem(given):
        p.error(f"--hidden / --heads: {problem}")
    if a.iters < 1:
        p.error(f"--iters must be >= 1 (got {a.iters})")
    if a.warmup < 0:
        p.error(f"--warmup must be >= 0 (got {a.warmup})")
    if a.variant == "full_iteration" and a.warmup < 1:
        p.error("--variant full_iteration needs --warmup >= 1: gradients and optimizer state must exist before capture")
    if a.variant != EAGER and a.iters <= a.warmup:
        p.error(f"--iters {a.iters} must exceed --warmup {a.warmup} so that the graph is captured and replayed")
    if a.variant != EAGER and a.device == "cpu":
        p.error(f"--variant {a.variant} captures CUDA graphs: use --device cuda or auto, not cpu")
    if a.manual_gc is not None and a.manual_gc < 0:
        p.error(f"--manual-gc must be >= 0 (got {a.manual_gc})")
    return WorkloadConfig(a.hidden, a.layers, a.heads, a.seq_length, a.micro_batch, a.vocab, a.variant, scope,
                          a.warmup, a.iters, a.mem_fraction, a.dtype, a.device, a.seed, a.manual_gc)


def say(line: str) -> None:
    print(line, flush=True)


def model_flops(model: GPT, cfg: WorkloadConfig) -> float:
    """Model FLOPs of one iteration: 6 * matmul params * tokens + causal-free attention term (PaLM/Megatron)."""
    tokens = cfg.micro_batch * cfg.seq_length
    matmul_params = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    return 6.0 * matmul_params * tokens + 12.0 * cfg.layers * cfg.hidden * cfg.seq_length * tokens


def train_step(model: GPT, opt: torch.optim.Optimizer, tokens: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """One step with no host sync, so the same code is captured whole by the full-iteration graph."""
    opt.zero_grad(set_to_none=False)  # keep .grad buffers at fixed addresses for the graph
    logits = model(tokens)
    loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))
    loss.backward()
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), CLIP_GRAD)  # a tensor; no .item() here
    opt.step()
    return loss.detach(), grad_norm  # detached: keeping the autograd graph alive breaks the next capture


def capture_full_iteration(step: Callable[[], tuple[Tensor, Tensor]]) -> tuple[torch.cuda.CUDAGraph, tuple[Tensor, Tensor]]:
    say(lf.FULL_CAPTURE_START)
    start = time.perf_counter()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # syncs, then captures on its own side stream
        static_outputs = step()
    torch.cuda.synchronize()
    say(lf.FULL_CAPTURE_DONE)
    say(lf.capture_seconds(time.perf_counter() - start))
    return graph, static_outputs


def capture_scoped(model: GPT, cfg: WorkloadConfig, device: torch.device, dtype: torch.dtype) -> None:
    """Graph the chosen sub-blocks of every layer in place; forward and backward then replay them."""
    say(lf.TE_CAPTURE_START)
    start = time.perf_counter()
    # Execution order (layer 0 attn, layer 0 mlp, layer 1 attn, ...): the callables share one memory pool,
    # which is safe only when they replay in the order they were captured.
    modules = tuple(getattr(block, name) for block in model.blocks for name in cfg.scope)
    shape = (cfg.micro_batch, cfg.seq_length, cfg.hidden)
    # requires_grad=True as in the live run: each sub-block's input comes from the residual stream.
    samples = tuple((torch.randn(shape, device=device, dtype=dtype, requires_grad=True),) for _ in modules)
    torch.cuda.make_graphed_callables(modules, samples)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    say(lf.TE_CAPTURE_TIME.format(seconds=seconds))
    say(lf.capture_seconds(seconds))


def train(cfg: WorkloadConfig, device: torch.device, dtype: torch.dtype) -> None:
    cuda = device.type == "cuda"
    torch.manual_seed(cfg.seed)
    say(lf.SEED.format(seed=cfg.seed))  # Megatron's line: the parser reads the seed that the loss parity groups by
    if cfg.mem_fraction is not None and cuda:
        torch.cuda.set_per_process_memory_fraction(cfg.mem_fraction)
    model = GPT(cfg.vocab, cfg.hidden, cfg.heads, cfg.layers, cfg.seq_length).to(device=device, dtype=dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, capturable=cfg.variant == "full_iteration")
    flops = model_flops(model, cfg)
    # Static input buffers: every arm copies its next batch into the same tensors, as a graph needs.
    data = torch.randint(0, cfg.vocab, (N_BATCHES, cfg.micro_batch, cfg.seq_length + 1), device=device)
    tokens = torch.empty(cfg.micro_batch, cfg.seq_length, dtype=torch.long, device=device)
    labels = torch.empty_like(tokens)
    step = lambda: train_step(model, opt, tokens, labels)  # noqa: E731
    if cfg.variant == "scoped":
        say(lf.GRAPHABLE_LAYERS.format(layers=cfg.layers))
    say(f"{lf.INIT_SECONDS}{time.perf_counter() - _START:.3f}")
    say(lf.TRAINING_START)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    side = torch.cuda.Stream() if cfg.variant == "full_iteration" else None
    graph: torch.cuda.CUDAGraph | None = None
    static: tuple[Tensor, Tensor] | None = None
    replays = 0
    # how launch-bound eager is, and where its host time goes (the sub-blocks a scoped graph would capture)
    busy = BusyProbe(0, cfg.warmup, enabled=cuda and cfg.variant == EAGER, annotate=lambda: host_time.annotate_modules(
        [(getattr(block, name), name) for block in model.blocks for name in SCOPES], opt))
    if cfg.manual_gc is not None:  # as Megatron's train.manual_gc: off, collected once now and every N iterations
        gc.disable()
        gc.collect()
    for i in range(1, cfg.iters + 1):
        if i == 1:
            say(affinity.settle(PINNING))  # the training loop runs: the main thread to its own core
        busy.before(i)
        sync()
        t0 = time.perf_counter()
        batch = data[(i - 1) % N_BATCHES]
        tokens.copy_(batch[:, :-1])
        labels.copy_(batch[:, 1:])
        graphed = cfg.variant != EAGER and i > cfg.warmup
        if cfg.variant == "full_iteration" and not graphed:
            assert side is not None
            side.wait_stream(torch.cuda.current_stream())  # warm up on a side stream, as torch.cuda.graph requires
            with torch.cuda.stream(side):
                loss, grad_norm = step()
            torch.cuda.current_stream().wait_stream(side)
        elif cfg.variant == "full_iteration":
            if graph is None:
                graph, static = capture_full_iteration(step)
            assert static is not None
            graph.replay()
            loss, grad_norm = static
        else:
            if cfg.variant == "scoped" and i == cfg.warmup + 1:
                capture_scoped(model, cfg, device, dtype)
            loss, grad_norm = step()
        sync()
        ms = (time.perf_counter() - t0) * 1e3
        if graphed:
            replays += 1
            if replays == 1:
                say(lf.replay(i))
        say(lf.iteration_line(i, cfg.iters, micro_batch=cfg.micro_batch, elapsed_ms=ms,
                              tflops=flops / (ms * 1e-3) / 1e12, lr=LR, loss=loss.item(), grad_norm=grad_norm.item()))
        for line in busy.after(i):
            say(line)
        if cfg.manual_gc and i % cfg.manual_gc == 0:  # between iterations, outside the timed step
            gc.collect()
        if cuda:
            say(lf.memory_line(0, i, torch.cuda.memory_stats()))  # every iteration: Bridge stops after iteration 2
            if i == cfg.warmup + 1:
                # every arm, the same iteration: later peaks are the steady window's, the graph pool included
                torch.cuda.reset_peak_memory_stats()
                say(lf.peaks_reset(i))
    say(lf.replays(replays))
    say(lf.DELETING_GRAPHS)
    del graph, static
    say(lf.AFTER_TRAINING.format(now=lf.now()))


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(argv)
    global PINNING
    PINNING = affinity.start()  # before torch's threads exist: they inherit the other threads' cores
    has_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cfg.device == "cuda" or (cfg.device == "auto" and has_cuda) else "cpu")
    name = torch.cuda.get_device_name() if has_cuda and device.type == "cuda" else "cpu"
    say(f"{lf.DEVICE}{name} torch {torch.__version__} cuda {torch.version.cuda or 'none'}")
    say(provenance.log_line())  # the CUDA stack as this process sees it: the parser keeps it for runs.parquet
    if not has_cuda and cfg.variant != EAGER:
        print(lf.NO_CUDA, file=sys.stderr, flush=True)
        return BLOCKED_EXIT
    if not has_cuda and device.type == "cuda":
        print(f"{lf.ARM_BLOCKED}--device cuda needs a CUDA device (torch.cuda.is_available() is False)",
              file=sys.stderr, flush=True)
        return BLOCKED_EXIT
    if cfg.mem_fraction is not None and device.type == "cpu":
        print(f"{lf.MARK} warning: --mem-fraction applies to CUDA only; ignored on CPU", file=sys.stderr, flush=True)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[cfg.dtype or ("bf16" if device.type == "cuda" else "fp32")]
    train(cfg, device, dtype)  # a CUDA OOM propagates: its own traceback is what the parser classifies
    return 0


if __name__ == "__main__":
    sys.exit(main())
