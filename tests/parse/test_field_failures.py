"""Issue 14 item 1: every field failure (docs/megatron-facts.md §7.1) a Megatron Bridge job log can show gets its
outcome, error class, phase and proving line, from a log built from a real H200 fixture plus the field text
(tests/fixtures/field/recipe.py); and the general rules, whatever the text:

- a process that died after printing iterations (a traceback, a fatal line, torchrun's `failed (exitcode: N)`, a
  signal) is never completed nor unparseable: crashed (or the class its error names), the real error as the proving
  line (never torchrun's ChildFailedError), the phase of the iteration that was running;
- an error after `[after training is done]` fails the run at teardown, but its steady window stays usable;
- a graph arm that ran without any capture evidence is invalid, whatever else it printed.

Each row is classified twice, with the run.json the pipeline would write and without one (`graphsweep parse` of a
bare log): both must agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from graphsweep import logformat as lf
from graphsweep.parse import signatures as sg
from graphsweep.parse.records import RunSummary
from graphsweep.parse.run import parse_run
from graphsweep.parse.read import find_transient
from graphsweep.vocab import (
    BLOCKED, CANCELLED, CAPTURE, COMPLETED, CRASHED, INVALID, OOM, SETUP, STEADY, TEARDOWN, TIMEOUT, UNPARSEABLE,
    WARMUP,
)  # fmt: skip
from tests.fixtures.field import recipe as rc

FAILED = {"state": "FAILED", "exit_code": 1}


@dataclass(frozen=True)
class Row:
    log: str  # tests/fixtures/field/recipe.py LOGS key
    row: str  # row of docs/megatron-facts.md §7.1
    source: str  # where the text comes from (and where it was checked)
    outcome: str
    error_class: str | None
    phase: str | None
    signature_id: str | None  # catalogue id of the proving line (None: the line itself is the proof)
    proof: str | None  # a text of the proving line
    usable: bool = False
    retried: str | None = None  # the transient text the retry policy retries once (None: a result, not retried)


ROWS = [
    Row("ff01_fp8_setter_te215", "1", "MLM #4707 / PR #4874, TE PR #3015 (TE 2.15.0; TE 2.20.2 quantization.py L423 has "
        "the setter again, MCore 0.19.2 cuda_graphs.py L150-162 checks hasattr)", BLOCKED, "api_mismatch", CAPTURE,
        "fp8_skip_update_setter", "has no attribute 'set_skip_fp8_weight_update_tensor'"),
    Row("ff02_rng_tracker", "2", "MCore 0.19.2 cuda_graphs.py CudaGraphManager.__init__ L1822-1828 (Bridge PR #3856)",
        BLOCKED, "blocked_config", SETUP, "rng_tracker_not_graph_safe", "RNG tracker does not support cudagraphs!"),
    Row("ff03_illegal_memory_after_validation", "3", "TE #3316; torch 2.11 c10_cuda_check_implementation text",
        CRASHED, "illegal_memory_access", STEADY, "illegal_memory_access", "an illegal memory access was encountered"),
    Row("ff04_optimizer_graph_num_zeros", "4", "MLM PR #7407; MCore 0.19.2 clip_grads.py L275 .item() inside "
        "optimizer_cuda_graph.py L32-46", BLOCKED, "blocked_capture", CAPTURE, "optimizer_graph_num_zeros",
        "operation not permitted when stream is capturing"),
    Row("ff05_fsdp_param_gather_hang", "5", "MLM PR #7282 (hang in param_gather_event.wait(), no text); slurmstepd",
        TIMEOUT, "hang_timeout", CAPTURE, "time_limit", "DUE TO TIME LIMIT"),
    Row("ff05b_fsdp_hang_watchdog", "5", "the same hang, torch 2.11 ProcessGroupNCCL watchdog", CRASHED, "nccl_error",
        CAPTURE, "nccl_watchdog", "Watchdog caught collective operation timeout"),
    Row("ff06_teardown_hang", "6", "Bridge #3595 / #3395, PR #3459 (destroy_process_group hangs); slurmstepd",
        TIMEOUT, "hang_timeout", TEARDOWN, "time_limit", "DUE TO TIME LIMIT", usable=True),
    Row("ff07_eval_recapture_hang", "7", "Bridge PR #5291 (evaluation re-captures after cleanup); MCore 0.19.2 "
        "full_cuda_graph.py L209/L237 `for validation`", TIMEOUT, "hang_timeout", TEARDOWN, "time_limit",
        "DUE TO TIME LIMIT", usable=True),
    Row("ff08_oom_te_capture", "8", "TE PR #3427; torch 2.11 allocator text", OOM, "oom", CAPTURE, "cuda_oom",
        "CUDA out of memory. Tried to allocate 2.00 GiB"),
    Row("ff09_oom_as_capture_invalidated", "9", "pytorch PR #187795 (an OOM during capture can surface as "
        "cudaErrorStreamCaptureInvalidated: the log cannot tell)", BLOCKED, "blocked_capture", CAPTURE,
        "capture_invalidated", "operation failed due to a previous error during capture"),
    Row("ff10a_captures_underway_after_invalidated", "10", "TGI #3175; torch 2.11 CUDACachingAllocator.cpp:3662 "
        "(libc10_cuda.so): the cause printed first wins over the assert", BLOCKED, "blocked_capture", CAPTURE,
        "capture_invalidated", "operation failed due to a previous error during capture"),
    Row("ff10b_captures_underway_alone", "10", "torch 2.11 CUDACachingAllocator.cpp:3662 (libc10_cuda.so)", BLOCKED,
        "blocked_capture", CAPTURE, "captures_underway", "captures_underway.empty() INTERNAL ASSERT FAILED"),
    Row("ff11_microbatch_calculator_none", "11", "MLM #3802 / PR #4986; MCore 0.19.2 num_microbatches_calculator.py L19",
        CRASHED, "python_error", CAPTURE, None, "AttributeError: 'NoneType' object has no attribute 'get'"),
    Row("ff12_accumulategrad_warning", "12", "MLM PR #6021; the real te_attn.log prints it: a warning, not a failure",
        COMPLETED, None, None, None, "[after training is done]", usable=True),
    Row("ff13_eval_with_partial_graphs", "13", "MLM PR #6992: silent, nothing in the log says it", COMPLETED, None, None,
        None, "[after training is done]", usable=True),
    Row("ff14_grad_norm_nan", "14", "MLM PR #5288; Bridge train_utils.py drops `lm loss` when NaN", CRASHED, "nan",
        STEADY, None, "grad norm: nan"),
    Row("ff15_nonpinned_copy_capture", "15", "MLM PR #5401; torch 2.11 ATen native/cuda/Copy.cu (libtorch_cuda.so)",
        BLOCKED, "blocked_capture", CAPTURE, "capture_pageable_copy",
        "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned."),
    Row("ff16_aliased_streams_main", "16", "MCore main 0.20.0 cuda_graphs.py L146 (MLM PR #6643); not in 0.19.2",
        BLOCKED, "blocked_capture", CAPTURE, "cuda_graph_stream_aliasing",
        "CUDA graph stream pool contains aliased streams"),
    Row("ff17_grouped_tensor_main", "17", "MCore main 0.20.0 transformer_config.py L1414; not in 0.19.2", BLOCKED,
        "blocked_config", SETUP, "moe_grouped_tensor_needs_grouped_gemm",
        "ValueError: moe_use_grouped_tensor=True requires moe_grouped_gemm=True."),
    Row("ff18a_mfsdp_v2_graphs_main", "18", "Bridge main 0.7.0 config.py L1188; not in 0.6.2", BLOCKED, "blocked_config",
        SETUP, "mfsdp_v2_graphs", "ValueError: MFSDP V2 does not support CUDA graphs."),
    Row("ff18b_mfsdp_v2_optimizer_graphs_main", "18", "Bridge main 0.7.0 config.py L1182; not in 0.6.2", BLOCKED,
        "blocked_config", SETUP, "mfsdp_v2_optimizer_graph", "ValueError: MFSDP V2 does not support optimizer CUDA graphs."),
    Row("ff18c_energon_packing_graphs_main", "18", "Bridge main 0.7.0 config.py L1339; not in 0.6.2", BLOCKED,
        "blocked_config", SETUP, "energon_packing_graphs",
        "ValueError: Energon native sequence packing does not support CUDA graphs."),
    Row("ff19_offload_warmup", "19", "MCore 0.19.2 transformer_config.py L2630-2633", BLOCKED, "blocked_config", SETUP,
        "fine_grained_offload_warmup",
        "cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained activation offloading."),
]

# Rows 20-32 (docs/megatron-facts.md §7.1, added for issue 22). Rows 30-32 are Bridge / MCore assertions the constraint
# catalogue may come to know (issue 22 item 4, another branch): until then Bridge's `Pretrain failed ... with
# AssertionError: <text>` line is the proof (python_error); once a constraint carries the text, its id and class
KNOWN = {s.needle.decode(): s for s in sg.SIGNATURES}


def _assertion_row(log: str, row: str, source: str, text: str, phase: str) -> Row:
    sig = next((s for n, s in KNOWN.items() if n in text), None)
    if sig is None:
        return Row(log, row, source, CRASHED, "python_error", phase, None, text)
    return Row(log, row, source, sig.outcome, sig.error_class, phase, sig.id, sig.needle.decode())


ROWS += [
    Row("ff20_capture_isolation_param_gather", "20", "Bridge #1688 (comment), PR #5788: cudaErrorStreamCaptureIsolation "
        "after iteration 3 with full_iteration + ddp.overlap_param_gather_with_optimizer_step; the message is libcudart "
        "13.0's cudaGetErrorString of that enum", BLOCKED, "blocked_capture", CAPTURE, "capture_isolation",
        "dependency created on uncaptured work in another stream (cudaErrorStreamCaptureIsolation)"),
    Row("ff21_token_dispatcher_hang", "21", "Bridge #3517: a hang in token_dispatcher.py (GPU 0 %), no text; the "
        "walltime ends it. 8 steady iterations were measured before it", TIMEOUT, "hang_timeout", STEADY, "time_limit",
        "DUE TO TIME LIMIT", usable=True),
    Row("ff22_steady_hang_watchdog", "22", "Bridge PR #2258 (hang on GB300); torch 2.11 ProcessGroupNCCL watchdog text "
        "(docs/megatron-facts.md §5.8, MLM #735): a collective timeout while a graph arm replays its graphs is that "
        "replay's hang (the row's fix is cuda_graph_impl=none): not retried", CRASHED, "nccl_error",
        STEADY, "nccl_watchdog", "Watchdog caught collective operation timeout"),
    Row("ff23_fsdp_te_replay_ima", "23", "MLM PR #4232, Bridge #2427: an illegal memory access at replay, TE scoped "
        "graphs + Megatron-FSDP; TE #3316's text. A graph arm's CUDA error: not retried", CRASHED,
        "illegal_memory_access", STEADY, "illegal_memory_access",
        "an illegal memory access was encountered (cudaErrorIllegalAddress)"),
    Row("ff24_log_flood_oom_kill", "24", "MLM PR #7348 (torch >= 2.14 warns on every register_generator_state call; the "
        "launcher is OOM-killed, exit 137, after a good run); Slurm's cgroup oom-kill line", CRASHED, "host_oom",
        TEARDOWN, "host_oom_kill", "Detected 1 oom-kill event(s)", usable=True),
    Row("ff28_full_iteration_oom_capture", "28", "Bridge PR #5356 (OOM at every full-iteration configuration, expandable "
        "segments on); torch 2.11 allocator text", OOM, "oom", CAPTURE, "cuda_oom",
        "CUDA out of memory. Tried to allocate 2.00 GiB"),
    Row("ff29_expandable_nccl_register_hang", "29", "pytorch #158029, torchtitan #3306: expandable segments + NCCL "
        "buffer registration hang; no text, the walltime ends it", TIMEOUT, "hang_timeout", STEADY, "time_limit",
        "DUE TO TIME LIMIT", usable=True),
    _assertion_row("ff30a_qwen3_vl_fixed_lengths", "30", "Bridge 0.6.2 models/qwen_vl/modelling_qwen3_vl/model.py L389",
                   "Qwen3-VL MoE with CUDA graph requires fixed sequence lengths (variable_seq_lengths=False).", SETUP),
    _assertion_row("ff30b_exaone45_fixed_lengths", "30", "Bridge 0.6.2 models/exaone/exaone45/modelling_exaone45/model.py "
                   "L196", "EXAONE 4.5 with CUDA graph requires fixed sequence lengths (variable_seq_lengths=False).",
                   SETUP),
    _assertion_row("ff31a_no_graphs_to_delete", "31", "MCore 0.19.2 transformer/cuda_graphs.py L2773 (a custom loop "
                   "deletes graphs after a run shorter than its warmup)", "No CUDA Graphs were created to delete.",
                   TEARDOWN),
    _assertion_row("ff31b_graphs_should_exist", "31", "Bridge 0.6.2 training/train.py L555 (TE impl, warmup 0)",
                   "CUDA Graphs should have been created.", STEADY),
    _assertion_row("ff32_packed_moe_router_scope", "32", "Bridge main training/gpt_step.py L196 (PR #5470), at the first "
                   "step", "Packed MoE padding masks do not support router-scoped Transformer Engine CUDA graphs",
                   WARMUP),
]
# Rows whose failure prints nothing a classifier can read (the loss parity check of graphsweep/judge/parity.py and the
# memory figures are where they show)
NO_TEXT = {
    "13": "validation replays the training graph: silent (ff13_eval_with_partial_graphs completes)",
    "25": "cuda_graph_warmup_steps=0 + 1F1B EP overlap: wrong behaviour during capture, no error text (MLM #4490/#4491)",
    "26": "local graphs on latent MoE: the loss curve differs from eager, no error (MLM PR #4433)",
    "27": "MoE aux-loss tracker under graphs: the aux loss differs, no error (MLM #1494)",
}

# The general rules, on logs of the same recipe (issue 14 item 1)
GENERAL = [
    Row("g_a_traceback_after_iters", "death", "Bridge 0.6.2 pretrain.py L202-207 + the rank's traceback + torchrun 2.11",
        CRASHED, "python_error", STEADY, None, "Pretrain failed on rank=0 with RuntimeError: The size of tensor a"),
    Row("g_a2_traceback_no_runjson", "death", "the same, no run.json", CRASHED, "python_error", STEADY, None,
        "Pretrain failed on rank=0 with RuntimeError: The size of tensor a"),
    Row("g_b1_bare_fatal", "death", "CPython pylifecycle.c fatal_error", CRASHED, "fatal_error", STEADY, None,
        "Fatal Python error: Aborted"),
    Row("g_b2_bare_terminate", "death", "libstdc++ vterminate.cc", CRASHED, "fatal_error", STEADY, None,
        "terminate called after throwing an instance of 'c10::Error'"),
    Row("g_b3_bare_fatal_runjson", "death", "the same with run.json exit 134", CRASHED, "fatal_error", STEADY, None,
        "Fatal Python error: Aborted"),
    Row("g_c_torchrun_only", "death", "torch 2.11 elastic/multiprocessing/api.py L987", CRASHED, "exit_1", STEADY, None,
        "failed (exitcode: 1) local_rank: 0"),
    Row("g_d1_sigsegv_torchrun", "signal", "torch 2.11 api.py L987, exitcode -11", CRASHED, "segfault", STEADY,
        "exitcode_11", "failed (exitcode: -11)"),
    Row("g_d2_sigkill_torchrun", "signal", "torch 2.11 errors/__init__.py L142-143", CRASHED, "signal:SIGKILL", STEADY,
        None, "Signal 9 (SIGKILL) received by PID"),
    Row("g_d3_sigabrt_torchrun", "signal", "torch 2.11 errors/__init__.py L142-143", CRASHED, "signal:SIGABRT", STEADY,
        None, "Signal 6 (SIGABRT) received by PID"),
    Row("g_d4_agent_sigterm", "signal", "torch 2.11 agent/server/api.py L739, multiprocessing/api.py L86", CANCELLED,
        None, None, None, "Received 15 death signal, shutting down workers"),
    Row("g_d5_srun_segfault", "signal", "srun's task report", CRASHED, "segfault", STEADY, "segfault",
        "Segmentation fault (core dumped)"),
    Row("g_d6_subprocess_signals_repr", "signal", "CPython subprocess.py CalledProcessError.__str__", CRASHED,
        "segfault", STEADY, "sigsegv", "died with <Signals.SIGSEGV: 11>."),
    Row("g_e1_error_after_end_exit1", "teardown", "Bridge pretrain.py _maybe_destroy_process_group; NCCL text", CRASHED,
        "nccl_error", TEARDOWN, "dist_backend", "torch.distributed.DistBackendError: NCCL error", usable=True),
    Row("g_e2_error_after_end_norunjson", "teardown", "the same, no run.json", CRASHED, "nccl_error", TEARDOWN,
        "dist_backend", "torch.distributed.DistBackendError: NCCL error", usable=True),
    Row("g_e3_generic_after_end_exit1", "teardown", "a script's own error after pretrain() returned", CRASHED,
        "python_error", TEARDOWN, None, "KeyError: 'tflops'", usable=True),
    Row("g_f1_graph_arm_no_capture", "no capture", "te_attn.log without its capture lines", INVALID, "no_capture", None,
        None, None),
    Row("g_f2_eager_log_as_graph", "no capture", "eager.log parsed as the graph arm", INVALID, "no_capture", None, None,
        None),
]


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / f"{name}.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def classify(tmp_path: Path, name: str, run_info: dict | None = None, *, lines: list[str] | None = None,
             arm: str | None = None) -> RunSummary:
    built = rc.LOGS.get(name)
    lines = lines if lines is not None else built.lines
    warmup = built.warmup if built else 3
    p = _write(tmp_path, name, lines)
    return parse_run([p], arm=arm or (built.arm if built else "graph"), warmup=warmup, run_info=run_info).summary


def _check(tmp_path: Path, r: Row, s: RunSummary) -> None:
    got = (s.outcome, s.error_class, s.phase, s.signature_id, s.measurement_usable, s.transient)
    assert got == (r.outcome, r.error_class, r.phase, r.signature_id, r.usable, r.retried), s.reason
    # never boilerplate: torch's CUDA help lines, a bare Traceback
    assert s.signature is None or not lf.is_boilerplate(s.signature), s.signature
    if r.proof is not None:
        # the proving line is the cause: that very line of the log, never torchrun's report of a child's failure
        assert s.signature is not None and r.proof in s.signature, s.signature
        assert "ChildFailedError" not in s.signature
        line = rc.LOGS[r.log].lines[s.signature_line - 1]
        shown = re.sub(r" \((cudaError\w+)\)$", "", s.signature)  # a CUDA error's line, then the enum torch named
        assert line.startswith(shown.rstrip("…")), (s.signature_line, line)


@pytest.mark.parametrize("r", ROWS + GENERAL, ids=lambda r: r.log)
def test_field_row(tmp_path: Path, r: Row) -> None:
    built = rc.LOGS[r.log]
    with_json = classify(tmp_path, r.log, built.run_info)
    _check(tmp_path, r, with_json)
    if built.run_info is not None:  # the same log without run.json says the same (ff06/ff07, g_e* differed)
        bare = classify(tmp_path, r.log, None)
        _check(tmp_path, r, bare)
        assert (bare.signature_line, bare.failed_iteration) == (with_json.signature_line, with_json.failed_iteration)
    if with_json.outcome == CRASHED:  # the run rule's own check of the log (graphsweep/run/submit.py) agrees
        log = tmp_path / f"{r.log}.log"
        assert find_transient(log, arm=built.arm, warmup=built.warmup) == r.retried


def test_every_field_row_that_a_bridge_log_can_show_has_a_case() -> None:
    # rows 1-32 of docs/megatron-facts.md §7.1: a log for every row with a text; the silent ones say why not
    assert {r.row for r in ROWS} | set(NO_TEXT) == {str(n) for n in range(1, 33)}
    assert set(rc.LOGS) == {r.log for r in ROWS + GENERAL} | {"g_f3_no_capture_auto_arm"}


def test_failing_iterations_and_signal_names_in_the_reason(tmp_path: Path) -> None:
    s = classify(tmp_path, "g_a_traceback_after_iters", FAILED)
    assert (s.failed_iteration, s.last_iteration) == (13, 12)
    assert "killed by SIGKILL (signal 9)" in classify(tmp_path, "g_d2_sigkill_torchrun").reason
    assert "killed by SIGABRT (signal 6)" in classify(tmp_path, "g_d3_sigabrt_torchrun").reason
    assert "exit code 134 (128 + 6: SIGABRT)" in classify(tmp_path, "g_b3_bare_fatal_runjson",
                                                          rc.LOGS["g_b3_bare_fatal_runjson"].run_info).reason
    assert classify(tmp_path, "g_d4_agent_sigterm").infrastructure


# -------------------------------------------------------------------------------------------------------------
# General rule 1: a process that died after printing iterations is never completed nor unparseable
TE12 = rc.strip(rc.upto(rc.TE, rc.it(12)))
DEATHS = {  # the tail a dying job prints after iteration 12, and the class it must get
    "traceback": (rc.bridge_failure("RuntimeError", ["boom"], rc.FWD_BWD), "python_error"),
    "traceback without Bridge": (["Traceback (most recent call last):", '  File "/workspace/mb_run.py", line 9, in f',
                                  "    g()", "ValueError: boom"] + rc.torchrun(1), "python_error"),
    "fatal line": (["Fatal Python error: Aborted"], "fatal_error"),
    "std::terminate": (["terminate called without an active exception"], "fatal_error"),
    "torchrun exit 1": (rc.torchrun(1), "exit_1"),
    "torchrun SIGKILL": (rc.torchrun(-9), "signal:SIGKILL"),
    "torchrun SIGABRT": (rc.torchrun(-6), "signal:SIGABRT"),
    "torchrun SIGSEGV": (rc.torchrun(-11), "segfault"),
    "torchrun SIGBUS, other rank": (rc.torchrun(-7, other=[(1, 3602, 1)]), "signal:SIGBUS"),
}


@pytest.mark.parametrize("run_info", [None, FAILED], ids=["no run.json", "run.json FAILED"])
@pytest.mark.parametrize("death", sorted(DEATHS))
def test_a_death_after_iterations_is_a_crash_at_the_running_iteration(tmp_path: Path, death: str, run_info) -> None:
    tail, cls = DEATHS[death]
    s = classify(tmp_path, "death", run_info, lines=TE12 + tail)
    assert s.outcome not in (COMPLETED, UNPARSEABLE)
    assert (s.outcome, s.error_class, s.phase, s.failed_iteration) == (CRASHED, cls, STEADY, 13), s.reason
    assert s.signature_line > len(TE12) and "ChildFailedError" not in (s.signature or "")


def test_an_exception_before_later_iterations_is_not_the_cause(tmp_path: Path) -> None:
    # a logged, survived exception at iteration 5; the process dies at 13 with a bare fatal line
    te5, rest = rc.strip(rc.upto(rc.TE, rc.it(5))), TE12[len(rc.strip(rc.upto(rc.TE, rc.it(5)))):]
    lines = te5 + ["ValueError: survived (logged by a callback)"] + rest + ["Fatal Python error: Aborted"]
    s = classify(tmp_path, "stale", None, lines=lines)
    assert (s.outcome, s.error_class, s.signature) == (CRASHED, "fatal_error", "Fatal Python error: Aborted")


def test_the_launcher_told_to_stop_is_cancelled_unless_a_worker_died_first(tmp_path: Path) -> None:
    sigint = ["Traceback (most recent call last):", "KeyboardInterrupt",
              "W1130 09:22:17.390000 3580 torch/distributed/elastic/agent/server/api.py:739] Received 2 death signal, "
              "shutting down workers"]
    s = classify(tmp_path, "ctrl_c", None, lines=TE12 + sigint)
    assert (s.outcome, s.infrastructure) == (CANCELLED, True)
    crashed = classify(tmp_path, "crash_then_stop", None,
                       lines=TE12 + rc.bridge_failure("RuntimeError", ["boom"], rc.FWD_BWD, agent=False) + sigint[2:])
    assert (crashed.outcome, crashed.error_class) == (CRASHED, "python_error")
    failed = classify(tmp_path, "g_d4_agent_sigterm", FAILED)  # Slurm says FAILED: a crash, named by its signal
    assert (failed.outcome, failed.error_class) == (CRASHED, "signal:SIGTERM")


# -------------------------------------------------------------------------------------------------------------
# General rule 2: an error after `[after training is done]` fails the run at teardown; the window stays usable
END = rc.strip(rc.upto(rc.TE, "[after training is done]"))


@pytest.mark.parametrize("run_info", [None, FAILED], ids=["no run.json", "run.json FAILED"])
@pytest.mark.parametrize("tail", ["traceback", "fatal line", "torchrun exit 1", "torchrun SIGKILL"])
def test_a_death_after_the_end_marker_is_a_teardown_failure_with_a_usable_window(tmp_path, tail, run_info) -> None:
    s = classify(tmp_path, "after_end", run_info, lines=END + DEATHS[tail][0])
    assert (s.outcome, s.phase, s.failed_iteration, s.measurement_usable) == (CRASHED, TEARDOWN, None, True), s.reason
    assert s.steady_n == 26 and "teardown" in s.reason


def test_an_incomplete_window_is_not_made_usable_by_a_teardown_failure(tmp_path: Path) -> None:
    short = [line.replace("/      30 |", "/       7 |") for line in rc.strip(rc.upto(rc.TE, rc.it(7)))]
    s = classify(tmp_path, "short", None, lines=short + ["[after training is done] datetime: 2026-11-30 09:19:42 "]
                 + rc.torchrun(1))
    assert (s.outcome, s.phase, s.measurement_usable) == (CRASHED, TEARDOWN, False)


def test_exit_zero_after_the_end_marker_stays_completed(tmp_path: Path) -> None:
    # run.json's exit 0 is believed: a c10d warning as ranks exit is teardown noise, not a failure
    s = classify(tmp_path, "noise", {"state": "COMPLETED", "exit_code": 0},
                 lines=END + ["[W socket.cpp:464] recv failed: Connection reset by peer"])
    assert s.outcome == COMPLETED and s.measurement_usable


# -------------------------------------------------------------------------------------------------------------
# General rule 3: a graph arm without any capture evidence is invalid, whatever else it printed
NOCAP = [line for line in rc.strip(rc.TE) if "CUDA Graphs capture" not in line and "graphs deleted" not in line]
NOCAP12 = NOCAP[: next(i for i, line in enumerate(NOCAP) if rc.it(12) in line) + 1]


@pytest.mark.parametrize("tail,run_info", [
    (rc.bridge_failure("RuntimeError", ["boom"], rc.FWD_BWD), FAILED),
    (["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."], FAILED),
    ([rc.TIME_LIMIT], {"state": "TIMEOUT", "exit_code": None}),
    (["Fatal Python error: Aborted"], None),
], ids=["crash", "oom", "walltime", "fatal"])
def test_a_graph_arm_past_its_capture_iteration_without_capture_is_invalid(tmp_path, tail, run_info) -> None:
    s = classify(tmp_path, "nocap", run_info, lines=NOCAP12 + tail)
    assert (s.outcome, s.error_class) == (INVALID, "no_capture"), s.reason


def test_a_graph_arm_that_dies_before_its_capture_is_not_invalid(tmp_path: Path) -> None:
    te3 = rc.strip(rc.upto(rc.TE, rc.it(3)))
    s = classify(tmp_path, "early", FAILED, lines=te3 + ["torch.OutOfMemoryError: CUDA out of memory."])
    assert (s.outcome, s.phase) == (OOM, CAPTURE)


def test_optimizer_graph_capture_lines_are_capture_evidence(tmp_path: Path) -> None:
    # MCore 0.19.2 optimizer/optimizer_cuda_graph.py L32 / L46: an optimizer-only graph arm captured and replayed
    start, done = ("INFO:megatron.core.optimizer.optimizer_cuda_graph:Capture CUDA graph for optimizer!!!",
                   "INFO:megatron.core.optimizer.optimizer_cuda_graph:Optimizer CUDA graph capture done!!!")
    four = next(i for i, line in enumerate(NOCAP) if rc.it(4) in line)
    s = classify(tmp_path, "optimizer", {"state": "COMPLETED", "exit_code": 0},
                 lines=NOCAP[:four] + [start, done] + NOCAP[four:])
    assert (s.outcome, s.capture_seen, s.replay_seen, s.capture_iteration) == (COMPLETED, True, True, 4)
    failed = classify(tmp_path, "optimizer_fail", FAILED, lines=NOCAP[:four] + [start] + rc.bridge_failure(
        "RuntimeError", ["boom"], rc.FWD_BWD))
    assert (failed.outcome, failed.phase, failed.failed_iteration) == (CRASHED, CAPTURE, 4)
