"""Error texts of docs/megatron-facts.md §5.8 / §6.1 (and every catalogue signature) inside realistic logs.

The surrounding log is real: the setup part of tests/fixtures/logs/megatron-h200/te_attn.log and its real
iteration / Step Time / capture lines, renumbered. Then line prefixes (srun labels, `[rank4]: `,
`[default0]:`), ranks glued on one physical line, truncation mid-line and non-UTF-8 bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from graphsweep.parse import signatures as oc
from graphsweep.records import RunSummary
from graphsweep.parse.run import parse_run
from graphsweep.parse.matching import ERROR_ANCHORS
from graphsweep.parse.read import find_transient
from tests.support import LOGS

REAL = (LOGS / "megatron-h200/te_attn.log").read_bytes().split(b"\n")
_START = next(i for i, l in enumerate(REAL) if l.startswith(b"Starting training loop"))
HEAD = REAL[: _START + 1]  # setup, up to "Starting training loop at iteration 0"
_ITER = next(l for l in REAL if b"iteration        5/" in l)
_STEP = next(l for l in REAL if l.startswith(b"Step Time : 0.04s"))
CAPTURE = [l for l in REAL if b"Start CUDA Graphs capture" in l or b"Time spent in CUDA Graphs capture" in l]
END = [b"Deleting CUDA graphs", b"[after training is done] datetime: 2026-11-30 09:19:42 "]
PREFIXES = ["", "mx_v1_perf/0 ", "[rank4]: ", "[default0]:"]


def it_line(i: int, total: int = 30, **fields: str) -> bytes:
    line = re.sub(rb"iteration +\d+/ +\d+", b"iteration %8d/%8d" % (i, total), _ITER)
    for key, value in fields.items():
        line = re.sub(key.encode() + rb": [^|]*\|", f"{key}: {value} |".encode(), line)
    return line


def body(n: int, *, capture: bool = True, total: int = 30) -> list[bytes]:
    """Iterations 1..n as Bridge prints them (Step Time from rank 0, then the iteration line), TE capture on 4."""
    out: list[bytes] = []
    for i in range(1, n + 1):
        if capture and i == 4:
            out += CAPTURE
        out += [_STEP, it_line(i, total)]
    return out


def write(tmp_path: Path, lines: list[bytes], prefix: str = "", name: str = "log.txt", tail: bytes = b"\n") -> Path:
    p = tmp_path / name
    p.write_bytes(b"\n".join(prefix.encode() + l for l in lines) + tail)
    return p


def parse_lines(tmp_path: Path, lines: list[bytes], *, arm: str = "graph", warmup: int | None = 3, prefix: str = "",
                run_info: dict | None = None, tail: bytes = b"\n") -> RunSummary:
    p = write(tmp_path, lines, prefix, tail=tail)
    return parse_run([p], arm=arm, warmup=warmup, run_info=run_info).summary


def exception_line(sig: oc.Signature) -> bytes:
    """How the text reaches the log: as an exception message unless it is a log line itself."""
    if sig.requires == b"TypeError":
        return b"TypeError: " + sig.needle
    if sig.cuda_enum and oc.lf.CUDA_ERROR not in sig.needle:  # torch's form of a CUDA error (cudaGetErrorString)
        return b"torch.AcceleratorError: CUDA error: " + sig.needle
    line = sig.needle
    if sig.rule in (*oc.EXCEPTION_RULES, oc.R_CAPTURE, oc.R_REPLAY) and b"rror" not in sig.needle:
        line = b"AssertionError: " + sig.needle
    if sig.requires and sig.requires not in line:  # the message's other part, before the needle
        line = line.replace(sig.needle, sig.requires + b" " + sig.needle)
    return line


EXPECTED = {  # the generic needles decide a narrower class than their own when alone
    "gs_blocked": ("blocked", "env_blocked"),
}


@pytest.mark.parametrize("prefix", ["", "[rank4]: "])
@pytest.mark.parametrize("sig", oc.SIGNATURES, ids=lambda s: s.id)
def test_every_catalogue_signature(tmp_path: Path, sig: oc.Signature, prefix: str) -> None:
    # a signature proven by its traceback frame needs that frame above it, as Python prints it
    trace = [b"Traceback (most recent call last):",
             b'  File "/opt/Megatron-LM/megatron/core/x.py", line 950, in ' + sig.frame.encode(),
             b"    call()"] if sig.frame else []  # fmt: skip
    n_before = len(HEAD) + len(body(6)) + len(trace)
    s = parse_lines(tmp_path, HEAD + body(6) + trace + [exception_line(sig), b"Traceback (most recent call last):"],
                    prefix=prefix)
    assert (s.outcome, s.error_class) == EXPECTED.get(sig.id, (sig.outcome, sig.error_class)), s.reason
    assert s.signature_line == n_before + 1
    assert sig.needle.decode() in s.signature


def test_every_needle_is_reachable_through_the_prefilter() -> None:
    for sig in oc.SIGNATURES:
        texts = [exception_line(sig)]
        assert any(a in t for t in texts for a in ERROR_ANCHORS), sig.id


# Full lines quoted or described in docs/megatron-facts.md (§5.8, §6.1), with what they must become.
REFERENCE_LINES = [
    # §5.8 allocator OOM, new and old formats
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.54 GiB. GPU 0 has a total capacity of 79.11 GiB "
     "of which 1.02 GiB is free. Process 1234 has 78.07 GiB memory in use. Including non-PyTorch memory, this process "
     "has 78.07 GiB memory in use. Of the allocated memory 70.12 GiB is allocated by PyTorch, and 6.34 GiB is reserved "
     "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  "
     "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)", "oom", "oom"),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacty; "
     "75.21 GiB already allocated; 1.50 GiB free; 77.01 GiB reserved in total by PyTorch) If reserved memory is >> "
     "allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management "
     "and PYTORCH_CUDA_ALLOC_CONF", "oom", "oom"),
    ("RuntimeError: CUDA error: out of memory", "oom", "oom"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "oom", "oom"),
    ("node01:1234:1300 [0] NCCL WARN Failed to CUDA calloc 6291456 bytes", "oom", "oom"),
    # §5.8 capture errors
    ("torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing", "blocked", "blocked_capture"),
    ("torch.AcceleratorError: CUDA error: operation failed due to a previous error during capture", "blocked",
     "blocked_capture"),
    ("RuntimeError: CUDA error: capturing stream has unjoined work", "blocked", "blocked_capture"),
    ("RuntimeError: CUDA error: operation would make the legacy stream depend on a capturing blocking stream", "blocked",
     "blocked_capture"),
    ("RuntimeError: CUDA error: cudaErrorStreamCaptureIsolation", "blocked", "blocked_capture"),
    ("RuntimeError: CUDA error: cudaErrorCapturedEvent", "blocked", "blocked_capture"),
    ("RuntimeError: Offset increment outside graph capture encountered unexpectedly.", "blocked", "blocked_capture"),
    # §5.8 illegal memory access (CUDA and NCCL forms)
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "crashed", "illegal_memory_access"),
    ("node01:1234:1300 [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'", "crashed",
     "illegal_memory_access"),
    # §5.8 NCCL / distributed
    ("[rank2]:[E1130 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=305, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600381 milliseconds "
     "before timing out.", "crashed", "nccl_error"),
    ("[E ProcessGroupNCCL.cpp:475] Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
     "CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.", "crashed", "nccl_error"),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote "
     "process exited or there was a network error, NCCL version 2.21.5 ncclRemoteError", "crashed", "nccl_error"),
    ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
     "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use", "crashed",
     "transient:network"),
    ("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5 "
     "ncclUnhandledCudaError: Call to CUDA function failed.", "crashed", "nccl_error"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
     "[10.0.0.2]:29500: Connection reset by peer", "crashed", "transient:network"),
    # §5.8 Slurm / launcher
    ("slurmstepd: error: *** JOB 1234 ON node01 CANCELLED AT 2026-11-30T10:00:00 DUE TO TIME LIMIT ***", "timeout",
     "hang_timeout"),
    ("E1130 09:22:17.393000 3580 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -11) "
     "local_rank: 0 (pid: 3601) of binary: /opt/torch/.venv/bin/python", "crashed", "segfault"),
    ("Segmentation fault (core dumped)", "crashed", "segfault"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=1234.0. Some of the step tasks have been OOM Killed.",
     "crashed", "host_oom"),
    # §5.8 NaN checks
    ("RuntimeError: Rank 0, node node01, device 0, iteration 7: Unexpected result nan (message='found NaN in local "
     "forward loss calculation')", "crashed", "nan"),
    ("ERROR:megatron.core.rerun_state_machine: found NaN in local grad norm for bucket #0 in backward pass before "
     "data-parallel communication collective", "crashed", "nan"),
    ("RuntimeError: Rank 3, node node01, device 3, iteration 9: Unexpected result inf (message='found Inf in local "
     "forward loss calculation')", "crashed", "nan"),
    # §6.1
    ("AssertionError: Transformer engine's RNG tracker is required for cudagraphs, it can be enabled with "
     "use_te_rng_tracker=True'.", "blocked", "blocked_config"),
    ('ValueError: Megatron Bridge supports model.cuda_graph_impl="local" only for full-iteration CUDA graphs with '
     "scopes ['attn']. Use model.cuda_graph_impl=\"transformer_engine\" for scoped CUDA graph capture such as \"attn\" "
     'or "mlp".', "blocked", "blocked_config"),
    ("AssertionError: cuda_graph_modules must not contain both moe and moe_router.", "blocked", "blocked_config"),
    ("ValueError: CUDA graphs not supported with CPU offloading.", "blocked", "blocked_config"),
    ("AssertionError: full recompute is only supported with full iteration CUDA graph.", "blocked", "blocked_config"),
    ("run_script.py: error: argument --cuda_graph_impl: invalid is_cuda_graph_impl_valid value: 'foo'", "blocked",
     "blocked_config"),
    ("megatron.bridge.utils.overrides.OverridesError: Failed to parse Hydra overrides", "blocked", "blocked_config"),
    ("AssertionError: CUDA graph accepts only Tensor inputs. inference_context and packed_seq_params are excluded from "
     "input list. For inference cuda graph, please use cuda_graph_impl=local instead.", "blocked", "blocked_capture"),
    ("[rank0]: Available backends = {FlashAttention=False, FusedAttention=False, UnfusedDotProductAttention=False}",
     "blocked", "env_blocked"),
    ("AttributeError: 'TransformerLayer' object has no attribute 'is_moe_layer'", "blocked", "api_mismatch"),
    ("TypeError: get_device_pointer_for_data_and_scales() takes 4 positional arguments but 5 were given", "blocked",
     "api_mismatch"),
    ("AttributeError: 'NoneType' object has no attribute 'copy_'", "blocked", "api_mismatch"),
    # MCore's replay check: the captured graph failed at replay (issue 22: no longer "capture failed")
    ("AssertionError: CUDA graph argument mismatch:", "crashed", "graph_replay"),
    ("AssertionError: Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph with "
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.", "blocked", "blocked_config"),
]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("text,outcome,error_class", REFERENCE_LINES, ids=lambda v: str(v)[:50])
def test_reference_error_texts(tmp_path: Path, text: str, outcome: str, error_class: str, prefix: str) -> None:
    s = parse_lines(tmp_path, HEAD + body(8) + [text.encode()], prefix=prefix)
    assert (s.outcome, s.error_class) == (outcome, error_class), s.reason
    assert s.signature_line == len(HEAD) + len(body(8)) + 1


@pytest.mark.parametrize("text,outcome,error_class", REFERENCE_LINES[:3] + REFERENCE_LINES[12:16],
                         ids=lambda v: str(v)[:40])
def test_error_glued_to_another_ranks_line(tmp_path: Path, text: str, outcome: str, error_class: str) -> None:
    """Lines of two ranks on one physical line, in either position; the iteration row survives."""
    lines = HEAD + body(7) + [it_line(8) + b"[rank0]: " + text.encode()] + [b"[rank1]: " + text.encode() + _STEP]
    s = parse_lines(tmp_path, lines)
    assert (s.outcome, s.error_class) == (outcome, error_class)
    p = write(tmp_path, lines)
    assert parse_run([p], arm="graph", warmup=3).iterations.iteration.max() == 8


def test_non_utf8_bytes(tmp_path: Path) -> None:
    lines = HEAD + [b"NCCL banner \xff\xfe\x80 garbage"] + body(9) + \
        [b"\xc3(\xff torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.25 GiB. GPU 0 \xfe\xfe"]
    s = parse_lines(tmp_path, lines)
    assert (s.outcome, s.phase, s.oom_request, s.failed_iteration) == ("oom", "steady", "3.25 GiB", 10)
    assert "\ufffd" in s.signature  # replaced, not an exception


def test_truncated_inside_the_error_line_still_classifies(tmp_path: Path) -> None:
    s = parse_lines(tmp_path, HEAD + body(5) + [b"torch.OutOfMemoryError: CUDA out of memory. Tried to alloc"],
                    tail=b"")
    assert (s.outcome, s.oom_request, s.phase) == ("oom", None, "steady")


def test_truncated_mid_iteration_is_unparseable(tmp_path: Path) -> None:
    lines = HEAD + body(12) + [it_line(13)[:60]]
    s = parse_lines(tmp_path, lines, tail=b"")
    assert s.outcome == "unparseable" and "truncated" in s.reason and s.n_iterations == 12
    assert s.signature_line == len(lines)


def test_binary_and_empty_files(tmp_path: Path) -> None:
    b = tmp_path / "core.bin"
    b.write_bytes(bytes(range(256)) * 64)
    s = parse_run([b], arm="eager", warmup=3).summary
    assert s.outcome == "unparseable" and "binary" in s.reason
    e = tmp_path / "empty.log"
    e.write_bytes(b"")
    s = parse_run([e], arm="eager", warmup=3).summary
    assert s.outcome == "unparseable" and "empty" in s.reason
    s = parse_run([tmp_path / "missing.log"], arm="eager", warmup=3).summary
    assert s.outcome == "unparseable" and "cannot read" in s.reason


# ---------------------------------------------------------------- phases of an OOM
def test_oom_phases(tmp_path: Path) -> None:
    oom = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.54 GiB. GPU 0 has a total capacity"
    setup = parse_lines(tmp_path, HEAD[:-1] + [oom])  # before "Starting training loop"
    assert (setup.outcome, setup.phase) == ("oom", "setup")
    # TE capture of iteration 4 (TE #2543: OOM inside create_cudagraphs)
    cap = parse_lines(tmp_path, HEAD + body(3) + CAPTURE[:1] + [oom])
    assert (cap.phase, cap.failed_iteration) == ("capture", 4)
    assert cap.reason.startswith("CUDA OOM at capture (iteration 4) allocating 1.54 GiB")
    # full-iteration, warmup 2: OOM after capture done, in the capture iteration's optimizer step (Bridge PR #3706)
    full = [b"INFO:megatron.core.full_cuda_graph:Capture CUDA graph for training!!!",
            b"INFO:megatron.core.full_cuda_graph:CUDA graph capture done for training!!!"]
    after = parse_lines(tmp_path, HEAD + body(2, capture=False) + full + [oom], warmup=2)
    assert (after.phase, after.failed_iteration) == ("capture", 3)
    steady = parse_lines(tmp_path, HEAD + body(10) + [oom])
    assert (steady.phase, steady.failed_iteration) == ("steady", 11)
    warm = parse_lines(tmp_path, HEAD + body(1) + [oom], arm="eager")
    assert (warm.phase, warm.failed_iteration) == ("warmup", 2)


# ---------------------------------------------------------------- NaN in iteration lines
def test_nan_grad_norm_and_missing_lm_loss(tmp_path: Path) -> None:
    nan_line = re.sub(rb" lm loss: [^|]*\|", b"", it_line(12, grad_norm="nan"))  # Bridge drops lm loss when NaN
    s = parse_lines(tmp_path, HEAD + body(11) + [_STEP, nan_line] + END)
    assert (s.outcome, s.error_class, s.phase, s.failed_iteration) == ("crashed", "nan", "steady", 12)
    assert s.signature_line == len(HEAD) + len(body(11)) + 2


# ---------------------------------------------------------------- formats
def test_mcore_format_mb_memory_timers_and_extra_fields(tmp_path: Path) -> None:
    lines = [b"Starting training loop at iteration 0"]
    for i in range(1, 13):
        lines.append(
            f" [2024-04-06 03:02:12.123456] iteration {i:8d}/{12:8d} | consumed samples: {i * 128:12d} | elapsed time "
            f"per iteration (ms): {5000 + i:.1f} | throughput per GPU (TFLOP/s/GPU): 243.6 | energy per GPU (J/iter/GPU): "
            f"1.0 | power per GPU (W/GPU): 600.0 | global batch size:   128 | lm loss: 1.818812E+00 | "
            f"load_balancing_loss: 1.013377E+00 | loss scale: 1.0 | grad norm: 1.300 | num zeros: 0.0 | "
            f"number of skipped iterations:   0 | number of nan iterations:   0 |".encode())
        if i <= 2:
            lines.append(f"[Rank 4] (after {i} iterations) memory (MB) | allocated: 21540.77294921875 | max allocated: "
                         f"{21540.7734375 + i} | reserved: 31336.0 | max reserved: 31336.0".encode())
            lines += [b"(min, max) time across ranks (ms):",
                      b"    forward-backward ...............................: (5000.01, 5001.10)",
                      b"    optimizer ......................................: (12.00, 13.00)"]
    lines.append(b"[after training is done] datetime: 2024-04-06 03:05:12 ")
    p = write(tmp_path, lines)
    r = parse_run([p], arm="eager", warmup=None)
    assert r.summary.outcome == "completed" and r.summary.n_iterations == 12
    assert r.iterations.tflops.eq(243.6).all() and r.iterations.loss.iloc[0] == pytest.approx(1.818812)
    mb = r.iterations.mem_max_allocated_gb.iloc[1]
    assert mb == pytest.approx(21542.7734375 * 1024 * 1024 / 1e9)  # MiB -> 1e9-byte GB
    assert r.summary.steady_first is not None and r.summary.steady_first >= 2


# ---------------------------------------------------------------- run.json joins
@pytest.mark.parametrize("state,outcome", [("PREEMPTED", "preempted"), ("NODE_FAIL", "node_fail"),
                                           ("CANCELLED by 1000", "cancelled")])
def test_infrastructure_states(tmp_path: Path, state: str, outcome: str) -> None:
    s = parse_lines(tmp_path, HEAD + body(9) + [REFERENCE_LINES[14][0].encode()],
                    run_info={"state": state, "exit_code": 1, "attempt": 1})
    assert s.outcome == outcome and s.infrastructure


def test_host_oom_is_not_cuda_oom(tmp_path: Path) -> None:
    s = parse_lines(tmp_path, HEAD + body(9), run_info={"state": "OUT_OF_MEMORY", "exit_code": 137})
    assert (s.outcome, s.error_class) == ("crashed", "host_oom") and "not a CUDA OOM" in s.reason


def test_timeout_before_and_after_the_window(tmp_path: Path) -> None:
    tl = b"slurmstepd: error: *** JOB 77 ON node01 CANCELLED AT 2026-11-30T10:00:00 DUE TO TIME LIMIT ***"
    early = parse_lines(tmp_path, HEAD + body(6) + [tl], run_info={"state": "TIMEOUT", "exit_code": None})
    assert (early.outcome, early.measurement_usable) == ("timeout", False) and "before the measurement" in early.reason
    late = parse_lines(tmp_path, HEAD + body(20) + [tl])
    assert (late.outcome, late.measurement_usable, late.steady_n) == ("timeout", True, 16)
    assert "usable" in late.reason and late.step_ms_median is not None
    hang = parse_lines(tmp_path, HEAD + body(30) + [tl])  # all steps done, then a hang (MLM #2130)
    assert hang.measurement_usable and "hung after its last iteration" in hang.reason


def test_exit_zero_without_end_marker_completes_and_lost_job(tmp_path: Path) -> None:
    ok = parse_lines(tmp_path, HEAD + body(30), run_info={"state": "COMPLETED", "exit_code": 0})
    assert ok.outcome == "completed"
    lost = parse_lines(tmp_path, HEAD + body(7), run_info={"state": None, "exit_code": None, "attempt": 1})
    assert lost.outcome == "lost" and lost.infrastructure
    alone = parse_lines(tmp_path, HEAD + body(7))
    assert alone.outcome == "unparseable" and "incomplete" in alone.reason


def test_unknown_failure_uses_the_exception_line(tmp_path: Path) -> None:
    s = parse_lines(tmp_path, HEAD + body(6) + [b"Traceback (most recent call last):", b'  File "x.py", line 1',
                                                b"ZeroDivisionError: division by zero"],
                    run_info={"state": "FAILED", "exit_code": 1})
    assert (s.outcome, s.error_class, s.phase) == ("crashed", "python_error", "steady")
    assert "ZeroDivisionError" in s.signature


def test_teardown_noise_after_a_clean_end_is_ignored(tmp_path: Path) -> None:
    s = parse_lines(tmp_path, HEAD + body(30) + END + [b"[W socket.cpp:464] recv failed: Connection reset by peer"],
                    run_info={"state": "COMPLETED", "exit_code": 0})
    assert s.outcome == "completed" and any("ignored after the end" in n for n in s.notes)


# ---------------------------------------------------------------- transient retry
def test_find_transient(tmp_path: Path) -> None:
    wd = REFERENCE_LINES[14][0]
    assert find_transient("\n".join(["x"] * 3 + [wd]), arm="graph") == "Watchdog caught collective operation timeout"
    # a CUDA kernel fault is retried in an eager arm only (issue 22: in a graph arm the graph is the suspect); an
    # unknown arm is read as a graph arm
    ima = "RuntimeError: CUDA error: an illegal memory access was encountered\nFor debugging consider passing " \
          "CUDA_LAUNCH_BLOCKING=1\n"
    assert find_transient(ima, arm="eager") == "illegal memory access"
    assert find_transient(ima, arm="graph") is None and find_transient(ima) is None
    # torch's CUDA_LAUNCH_BLOCKING hint is boilerplate: it proves nothing, in any arm
    assert find_transient("For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n", arm="eager") is None
    # deterministic explanations are never retried
    assert find_transient(REFERENCE_LINES[0][0] + "\n" + wd, arm="eager") is None
    assert find_transient(write(tmp_path, HEAD + body(3)), arm="eager") is None


def test_retry_failing_the_same_way_records_both_attempts(tmp_path: Path) -> None:
    # an eager arm: a collective timeout is transient there (in a graph arm's replay it is not:
    # tests/parse/test_failure_causes.py)
    wd = REFERENCE_LINES[14][0].encode()
    first = write(tmp_path, HEAD + body(9, capture=False) + [wd], name="log.transient.1.txt")
    info = {"state": "FAILED", "exit_code": 1, "attempt": 1,
            "previous_attempts": [{"log": str(first), "signature": "Watchdog caught collective operation timeout"}]}
    s = parse_lines(tmp_path, HEAD + body(11, capture=False) + [wd], run_info=info, arm="eager")
    assert (s.outcome, s.error_class) == ("crashed", "nccl_error")
    at = len(HEAD) + len(body(9, capture=False)) + 1
    assert "failed the same way twice" in s.reason and f"{first}:{at}" in s.reason
    assert s.previous_attempts[0]["line"] == at
    ok = parse_lines(tmp_path, HEAD + body(30, capture=False) + END, arm="eager",
                     run_info={**info, "state": "COMPLETED", "exit_code": 0})
    assert ok.outcome == "completed" and "retried once" in ok.reason


# ---------------------------------------------------------------- builtin workload lines (graphsweep/workload.py)
def test_builtin_no_cuda_blocked(tmp_path: Path) -> None:
    s = parse_lines(tmp_path, [b"[graphsweep] device: cpu torch 2.13.0 cuda none",
                               b"[graphsweep] blocked: CUDA graphs need a CUDA device (torch.cuda.is_available() is False)"],
                    run_info={"state": None, "exit_code": 3})
    assert (s.outcome, s.error_class) == ("blocked", "no_cuda")
    assert "CUDA graphs need a CUDA device (torch.cuda.is_available() is False)" in s.reason


def test_builtin_replay_markers(tmp_path: Path) -> None:
    lines = [b"Capture CUDA graph for training!!!", b"CUDA graph capture done for training!!!",
             b"[graphsweep] capture seconds: 0.120", b"[graphsweep] cuda graph replay: iteration 4"]
    base = [b"Starting training loop at iteration 0"] + [it_line(i, 12) for i in range(1, 4)]
    rest = [it_line(i, 12) for i in range(4, 13)]
    s = parse_lines(tmp_path, base + lines + rest + [b"[graphsweep] cuda graph replays: 9"] + END)
    assert (s.outcome, s.capture_seen, s.replay_seen, s.capture_s) == ("completed", True, True, 0.12)
    none = parse_lines(tmp_path, base + lines[:3] + rest + [b"[graphsweep] cuda graph replays: 0"] + END)
    assert (none.outcome, none.error_class) == ("invalid", "no_replay")


# ---------------------------------------------------------------- several files
def test_restart_files_merge_by_iteration(tmp_path: Path) -> None:
    wd = REFERENCE_LINES[14][0].encode()
    a = write(tmp_path, HEAD + body(12) + [wd], name="log_0.txt")
    resumed = [b"Starting training loop at iteration 10"] + \
        [x for i in range(11, 31) for x in (_STEP, it_line(i).replace(b"| elapsed time per iteration (ms): 39.",
                                                                       b"| elapsed time per iteration (ms): 41."))]
    b = write(tmp_path, HEAD[:-1] + resumed + END, name="log_1.txt")
    r = parse_run([a, b], arm="eager", warmup=3)
    assert r.summary.outcome == "completed", r.summary.reason
    assert r.iterations.iteration.tolist() == list(range(1, 31))
    assert set(r.iterations[r.iterations.iteration >= 11].source_file) == {str(b)}  # the restart's rows win
    assert any("restarted" in n for n in r.summary.notes)


def test_summary_json_roundtrip(tmp_path: Path) -> None:
    s = parse_lines(tmp_path, HEAD + body(3) + CAPTURE[:1] + [REFERENCE_LINES[0][0].encode()])
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    assert d["phase"] == "capture" and d["oom_request"] == "1.54 GiB"
