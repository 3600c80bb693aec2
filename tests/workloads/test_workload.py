"""The builtin workload on CPU: real training runs whose logs Megatron Bridge's own regexes read."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from graphsweep import logformat  # noqa: E402
from graphsweep.entry import builtin_gpt as workload  # noqa: E402
from tests.support import ROOT  # noqa: E402

REPO = ROOT
TINY = ["--hidden", "32", "--layers", "2", "--heads", "2", "--seq-length", "16", "--micro-batch", "2", "--vocab", "128"]

# Bridge scripts/performance/utils/evaluate.py::get_metrics_from_logfiles (docs/megatron-facts.md §5.2)
BRIDGE = {
    "iteration": re.compile(r"iteration\s+(\d+)/\s+\d+"),
    "elapsed": re.compile(r"elapsed time per iteration \(ms\):\s+([\d.]+)"),
    "lm_loss": re.compile(r"lm loss:\s+([\d.E+\-]+)"),
    "grad_norm": re.compile(r"grad norm:\s+([\d.]+|nan|inf)"),
}
THROUGHPUT = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s+([\d.]+)")  # MCore/Bridge training_log field


def run_workload(*args: str, hide_gpu: bool = True) -> subprocess.CompletedProcess[str]:
    # CUDA_VISIBLE_DEVICES="" hides any GPU, so the CPU facts hold on a GPU machine too.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if hide_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run([sys.executable, "-m", "graphsweep.entry.builtin_gpt", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


@pytest.mark.torch
def test_eager_cpu_run_speaks_the_bridge_log_format() -> None:
    proc = run_workload(*TINY, "--iters", "4", "--variant", "eager")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"\[graphsweep\] device: cpu torch \S+ cuda \S+", lines[0])
    assert lines[1].startswith("[graphsweep] provenance: {")  # the CUDA stack as the training process sees it
    assert lines[2] == "> setting random seeds to 1234 ..."  # Megatron's line, the seed the loss parity groups by
    assert re.fullmatch(r"time to initialize megatron \(seconds\): \d+\.\d{3}", lines[3])
    assert lines[4] == "Starting training loop at iteration 0"
    iteration_lines = [line for line in lines if BRIDGE["iteration"].search(line)]
    assert [int(BRIDGE["iteration"].search(line).group(1)) for line in iteration_lines] == [1, 2, 3, 4]
    for line in iteration_lines:
        assert re.match(r" \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +\d+/ +4 \|", line)
        assert float(BRIDGE["elapsed"].search(line).group(1)) > 0.0
        assert math.isfinite(float(BRIDGE["lm_loss"].search(line).group(1)))
        assert float(BRIDGE["grad_norm"].search(line).group(1)) > 0.0
        assert THROUGHPUT.search(line)
        assert line.endswith("number of skipped iterations:   0 | number of nan iterations:   0 |")
    assert "memory (GB)" not in proc.stdout  # no CUDA, no memory line
    assert "memory peaks reset" not in proc.stdout  # nor a reset of CUDA peaks
    assert "[graphsweep] cuda graph replays: 0" in lines
    assert re.fullmatch(r"\[after training is done\] datetime: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", lines[-1])


@pytest.mark.torch
@pytest.mark.parametrize("variant", [["--variant", "full_iteration"], ["--variant", "scoped", "--scope", "attn,mlp"]])
def test_graph_variant_without_cuda_is_blocked_not_faked(variant: list[str]) -> None:
    proc = run_workload(*TINY, "--iters", "6", *variant)
    assert proc.returncode == workload.BLOCKED_EXIT == 3
    assert proc.stderr.splitlines() == [
        "[graphsweep] blocked: CUDA graphs need a CUDA device (torch.cuda.is_available() is False)"
    ]
    assert not BRIDGE["iteration"].search(proc.stdout)
    assert "Starting training loop" not in proc.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--variant", "eager", "--scope", "attn"], "--scope 'attn' is only valid with --variant scoped"),
        (["--variant", "scoped", "--scope", "attn,moe"], "unknown name(s) ['moe']; use a comma list of attn, mlp"),
        (["--variant", "scoped"], "--variant scoped needs --scope"),
        (["--variant", "full_iteration", "--warmup", "0"], "full_iteration needs --warmup >= 1"),
        (["--variant", "full_iteration", "--warmup", "6"], "--iters 6 must exceed --warmup 6"),
        (["--variant", "full_iteration", "--device", "cpu"], "use --device cuda or auto, not cpu"),
    ],
)
def test_bad_arguments_fail_with_a_message_naming_the_flag(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        workload.main([*TINY, "--iters", "6", *extra])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_scope_is_normalised_to_execution_order() -> None:
    cfg = workload.parse_config([*TINY, "--iters", "6", "--variant", "scoped", "--scope", "mlp,attn,mlp"])
    assert cfg.scope == ("attn", "mlp")


def test_nan_loss_drops_the_lm_loss_key_like_bridge() -> None:
    line = logformat.iteration_line(3, 6, micro_batch=1, elapsed_ms=12.5, tflops=1.0, lr=1e-4, loss=float("nan"),
                                    grad_norm=float("nan"))
    assert "lm loss" not in line
    assert BRIDGE["grad_norm"].search(line).group(1) == "nan"
    assert BRIDGE["elapsed"].search(line).group(1) == "12.5"


def test_model_flops_is_six_params_tokens_plus_attention() -> None:
    cfg = workload.parse_config([*TINY, "--iters", "1"])
    model = workload.GPT(cfg.vocab, cfg.hidden, cfg.heads, cfg.layers, cfg.seq_length)
    tokens = 2 * 16
    matmul_params = 2 * 12 * 32 * 32 + 32 * 128  # per layer qkv 3h², proj h², fc1 4h², fc2 4h²; plus the head
    assert workload.model_flops(model, cfg) == 6 * matmul_params * tokens + 12 * 2 * 32 * 16 * tokens


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
CUDA_SHAPE = ["--hidden", "256", "--layers", "2", "--heads", "4", "--seq-length", "128", "--micro-batch", "2",
              "--vocab", "1024", "--iters", "7", "--warmup", "2"]


def losses(stdout: str) -> list[float]:
    return [float(m.group(1)) for m in map(BRIDGE["lm_loss"].search, stdout.splitlines()) if m]


@needs_cuda
@pytest.mark.torch
@pytest.mark.parametrize(
    ("variant", "capture_lines"),
    [
        (["--variant", "full_iteration"], ["Capture CUDA graph for training!!!", "CUDA graph capture done for training!!!"]),
        (["--variant", "scoped", "--scope", "attn,mlp"], ["Rank 0: 2 graphable layers.", "Start CUDA Graphs capture..."]),
    ],
)
def test_graph_variant_on_cuda_captures_once_and_replays_after_warmup(
    variant: list[str], capture_lines: list[str]
) -> None:
    proc = run_workload(*CUDA_SHAPE, *variant, hide_gpu=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for line in capture_lines:
        assert line in lines
    assert "[graphsweep] cuda graph replay: iteration 3" in lines  # warmup 2, capture and first replay on 3
    assert "[graphsweep] cuda graph replays: 5" in lines
    assert len([line for line in lines if "memory (GB) | mem-allocated-gigabytes:" in line]) == 7
    assert all("| mem-reserved-gigabytes: " in line for line in lines if "memory (GB)" in line)
    # peaks reset once, after the capture iteration, right after its memory line: later mem-max-* are steady
    reset = lines.index("[graphsweep] memory peaks reset after iteration 3")
    assert "(after 3 iterations) memory (GB)" in lines[reset - 1]
    assert len(losses(proc.stdout)) == 7


@needs_cuda
@pytest.mark.torch
@pytest.mark.parametrize(
    ("variant", "rel_tol"),
    [
        # Scoped graphs replay eager's own kernels: bit-identical losses on an H200 (torch 2.11).
        (["--variant", "scoped", "--scope", "attn,mlp"], 1e-4),
        # Full iteration uses AdamW(capturable=True), whose arithmetic differs slightly: 4e-4 after 14 steps there.
        (["--variant", "full_iteration"], 5e-3),
    ],
)
def test_graph_arms_train_like_eager(variant: list[str], rel_tol: float) -> None:
    """A graph that replays stale inputs or skips the update would drift far beyond these tolerances."""
    eager = run_workload(*CUDA_SHAPE, "--variant", "eager", hide_gpu=False)
    graph = run_workload(*CUDA_SHAPE, *variant, hide_gpu=False)
    assert eager.returncode == graph.returncode == 0, graph.stderr
    assert losses(graph.stdout) == pytest.approx(losses(eager.stdout), rel=rel_tol)


@needs_cuda
@pytest.mark.torch
def test_cuda_oom_surfaces_as_pytorchs_own_error() -> None:
    proc = run_workload("--hidden", "1024", "--layers", "2", "--heads", "8", "--seq-length", "4096",
                        "--micro-batch", "16", "--iters", "4", "--mem-fraction", "0.01", hide_gpu=False)
    assert proc.returncode != 0
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in proc.stderr
