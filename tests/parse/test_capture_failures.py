"""Issue 30 item 4: CUDA-graph failures read by their cause, round 3 (docs/failures.md "Read by their cause").

Logs are built as tests/parse/test_failure_causes.py builds them: the real Megatron Bridge H200 TE `attn` log
(tests/fixtures/logs/megatron-h200/te_attn.log) cut where the failure happens, then the failure in the form the
library prints it, with Bridge's `Pretrain failed` block and torchrun's report (tests/fixtures/field/recipe.py). Each
case names where its text comes from; the numbers inside a formatted message (group names, sizes, chunk ids) and the
line numbers of the traceback frames are plausible values, not copied from a run. Before this round each of these
logs read as a generic `python_error`, or named the capture's symptom instead of NCCL's cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from graphsweep.parse import signatures as sg
from graphsweep.parse.read import find_transient
from graphsweep.parse.records import RunSummary
from graphsweep.parse.run import parse_run
from graphsweep.vocab import BLOCKED, CAPTURE, CRASHED, EAGER, GRAPH, STEADY, WARMUP
from tests.fixtures.field import recipe as rc
from tests.support import ROOT

FAILED = {"state": "FAILED", "exit_code": 1}
DP = rc.DP
TE_CAP = rc.te_cap  # iterations 1-3, then `Start CUDA Graphs capture...` (iteration 4)
TE_DONE = rc.strip(rc.upto(rc.TE, "Time spent in CUDA Graphs capture"))  # the capture finished, iteration 4 runs
TE12 = rc.strip(rc.upto(rc.TE, rc.it(12)))
EAGER12 = rc.strip(rc.upto(rc.EAGER, rc.it(12)))


def run(tmp_path: Path, lines: list[str], arm: str = GRAPH, name: str = "log") -> tuple[RunSummary, str | None]:
    p = tmp_path / f"{name}.log"
    p.write_text("\n".join(lines) + "\n")
    return (parse_run([p], arm=arm, warmup=3, run_info=FAILED).summary,
            find_transient(p, arm=arm, warmup=3))


# vllm #4432 (https://github.com/vllm-project/vllm/issues/4432), as posted: NCCL's own line for the CUDA call that
# failed inside the capture, NCCL's return-code trace, then torch's error at capture_end
NCCL_WARN_ISOLATION = [
    "ts-1580615599d3449d98cf56a265c10977-worker-6:56890:56890 [0] enqueue.cc:267 NCCL WARN Cuda failure 'dependency "
    "created on uncaptured work in another stream'",
    "ts-1580615599d3449d98cf56a265c10977-worker-6:56890:56890 [0] NCCL INFO enqueue.cc:1045 -> 1",
]
INVALIDATED = rc.cuda_msg("operation failed due to a previous error during capture", "cudaErrorStreamCaptureInvalidated")
OFFLOAD_FRAMES = rc.FWD_BWD + [
    (f"{DP}/megatron/core/transformer/moe/experts.py", 825, "forward", "fc1_output = expert_fc1_manager.group_offload("),
    (f"{DP}/megatron/core/pipeline_parallel/fine_grained_activation_offload.py", 1288, "group_offload",
     "fine_grained_offloading_group_offload("),
    (f"{DP}/megatron/core/pipeline_parallel/fine_grained_activation_offload.py", 642, "bulk_offload",
     "release_tensor.untyped_storage().resize_(0)"),
]


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    lines: list[str]
    signature_id: str
    signature: str  # the proving line holds this (the cause, never the symptom)
    phase: str = CAPTURE


CASES = [
    Case("nccl_warn_names_the_capture_isolation",
         "vllm #4432: NCCL 2.x `NCCL WARN Cuda failure '<cudaGetErrorString>'` (src/include/checks.h CUDACHECK), "
         "libcudart cudaErrorStreamCaptureIsolation; torch's capture_end error after it is the symptom",
         TE_CAP + NCCL_WARN_ISOLATION + rc.te_capture_failure("torch.AcceleratorError", INVALIDATED),
         "capture_isolation", "NCCL WARN Cuda failure 'dependency created on uncaptured work in another stream'"),
    Case("te_wgrad_dgrad_graph_order",
         "TE >= 2.11 pytorch/graph.py _make_graphed_callables (TE PR #2376): its f-string with plausible numbers",
         TE_CAP + rc.te_capture_failure("RuntimeError", [
             "Number of wgrad graph(0) doesn't match number of dgrad graphs (1) for chunk -1."], rc.CAPTURE_TE[:3] + [
             (f"{DP}/transformer_engine/pytorch/graph.py", 770, "_make_graphed_callables", "raise RuntimeError(")]),
         "te_wgrad_dgrad_order", "Number of wgrad graph(0) doesn't match number of dgrad graphs (1)"),
    Case("torch_rng_state_read_inside_capture",
         "torch 2.11 ATen/cuda/CUDAGeneratorImpl.cpp assertNotCapturing, the text of pytorch #83148 and "
         "flash-attention #165 (torch.cuda.get_rng_state() inside a capture)",
         TE_CAP + rc.te_capture_failure("RuntimeError", [
             "Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this call to be "
             "captured, please file an issue. Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive"],
             rc.CAPTURE_TE + [(f"{rc.TP}/torch/cuda/random.py", 42, "get_rng_state",
                               "return default_generator.get_state()")]),
         "rng_state_in_capture", "Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture"),
    Case("gtp_pool_exhausted_in_capture",
         "MCore main tensor_parallel/gtp_symmetric_memory.py L173 (MLM PR #6535): its f-string, plausible group/size",
         TE_CAP + rc.te_capture_failure("RuntimeError", [
             "[GTP] RegisteredLIFOPool exhausted during CUDA-graph capture (group=tp-gtp-0, numel=8388608, "
             "dtype=torch.bfloat16): likely the warmup depth or RS concurrency changed between warmup and capture -- "
             "run more warmup iters."], rc.CAPTURE_TE + [
             (f"{DP}/megatron/core/tensor_parallel/gtp_symmetric_memory.py", 173, "alloc", "raise RuntimeError(")]),
         "gtp_pool_exhausted_at_capture", "RegisteredLIFOPool exhausted during CUDA-graph capture"),
    Case("offload_frees_a_graph_output_after_capture",
         "MLM #7009: fine-grained activation offloading + TE scoped graphs, the first forward after `Time spent in "
         "CUDA Graphs capture` (bulk_offload's resize_(0)); torch's storage text",
         TE_DONE + rc.bridge_failure("RuntimeError", ["Trying to resize storage that is not resizable"], OFFLOAD_FRAMES),
         "offload_graph_output_resize", "RuntimeError: Trying to resize storage that is not resizable"),
]


# issue 36 item 2: the cause line first, and `blocked` where the capture refused the setting (the texts as Megatron,
# TE and torch print them; each constraint names its source in graphsweep/constraints)
OPT_CAPTURE = rc.FWD_BWD[:1] + [
    (f"{DP}/megatron/bridge/training/train.py", 1012, "train_step", "update_successful, grad_norm, num_zeros_in_grad = "
     "optimizer.step()"),
    (f"{DP}/megatron/core/optimizer/optimizer_cuda_graph.py", 43, "__call__",
     "OptimizerCudaGraphWrapper.result = self.optimizer_step_func()"),
    (f"{DP}/megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py", 166, "step", "self.cpu_optimizers[i].step()"),
    (f"{rc.TP}/torch/optim/optimizer.py", 523, "wrapper", "self._cuda_graph_capture_health_check()"),
    (f"{rc.TP}/torch/optim/optimizer.py", 479, "_cuda_graph_capture_health_check", "raise RuntimeError("),
]
RECOMPUTE_IN_TE = rc.CAPTURE_TE[:3] + [
    (f"{DP}/transformer_engine/pytorch/graph.py", 529, "_make_graphed_callables", "grad_inputs = torch.autograd.grad("),
    (f"{rc.TP}/torch/autograd/function.py", 307, "apply", "return user_fn(self, *args)"),
    (f"{DP}/megatron/core/tensor_parallel/random.py", 628, "backward", "raise RuntimeError("),
]
HOOKS_IN_TE = rc.CAPTURE_TE[:3] + [
    (f"{DP}/transformer_engine/pytorch/graph.py", 394, "_make_graphed_callables", "raise RuntimeError(")]
P2P_IN_FULL = rc.FULL_CAPTURE + [
    (f"{DP}/megatron/core/pipeline_parallel/schedules.py", 2198, "forward_backward_pipelining_without_interleaving",
     "input_tensor = p2p_communicator.recv_forward("),
    (f"{DP}/megatron/core/pipeline_parallel/p2p_communication.py", 446, "recv_forward", "input_tensor, _, _ = "
     "self._communicate("),
    (f"{DP}/megatron/core/pipeline_parallel/p2p_communication.py", 413, "_communicate", "req.wait()"),
]
TE_HOOKS = ("Modules must not have hooks registered at the time they are passed. However, registering hooks on modules "
            "after passing them through make_graphed_callables is allowed. If you have to use hooks during capture time, "
            "you can provide them in the capture_time_hooks argument, and they will be executed outside the CUDA graph "
            "capture context, meaning they will not be recorded into the graph and will not be replayed.")
CASES += [
    Case("optimizer_graph_of_a_cpu_offloaded_optimizer",
         "torch 2.11 optim/optimizer.py L479-483 (CPU offload's AdamW is not capturable, MCore 0.19.2 optimizer/"
         "__init__.py L502-529); the capture's own symptom after it is not the cause",
         TE_DONE + ["INFO:megatron.core.optimizer.optimizer_cuda_graph:Capture CUDA graph for optimizer!!!"]
         + rc.bridge_failure("RuntimeError", ["Attempting CUDA graph capture of step() for an instance of AdamW but "
                                              "param_groups' capturable is False."], OPT_CAPTURE) + INVALIDATED,
         "optimizer_graph_cpu_offload", "but param_groups' capturable is False."),
    Case("recompute_inside_a_te_graph",
         "MCore 0.19.2 tensor_parallel/random.py L627-631 under TE < 2.12's torch.autograd.grad (MLM #2758)",
         TE_CAP + rc.te_capture_failure("RuntimeError", [
             "Checkpointing is not compatible with .grad(), please use .backward() if possible"], RECOMPUTE_IN_TE),
         "te_graph_recompute_before_te_2_12", "Checkpointing is not compatible with .grad()"),
    Case("module_hooks_refused_by_te",
         "TE 2.20.2 pytorch/graph.py L386-401 (Megatron-FSDP's module hooks, field row 23)",
         TE_CAP + rc.te_capture_failure("RuntimeError", [TE_HOOKS], HOOKS_IN_TE),
         "te_graph_module_hooks", "Modules must not have hooks registered at the time they are passed."),
    Case("p2p_inside_a_full_iteration_capture_before_torch_2_7",
         "MCore 0.19.2 p2p_communication.py L413 `req.wait()`; pytorch #133984 (fixed by PR #148462, torch 2.7)",
         rc.full_cap + rc.bridge_failure("AttributeError", ["'NoneType' object has no attribute 'wait'"], P2P_IN_FULL),
         "p2p_in_capture_before_torch_2_7", "'NoneType' object has no attribute 'wait'"),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_a_capture_failure_is_read_by_its_cause(tmp_path: Path, c: Case) -> None:
    s, rule_retry = run(tmp_path, c.lines)
    assert (s.outcome, s.error_class, s.phase, s.signature_id) == (BLOCKED, "blocked_capture", c.phase,
                                                                   c.signature_id), s.reason
    assert c.signature in s.signature, s.signature
    assert s.reason.startswith("CUDA graph capture failed at capture (iteration 4): "), s.reason
    assert s.transient is None and rule_retry is None  # a capture failure is deterministic: never retried


def test_the_offload_text_is_the_offloads_only_through_its_frame(tmp_path: Path) -> None:
    # torch's storage text is generic: without bulk_offload on its traceback it stays the exception it is
    other = rc.FWD_BWD + [(f"{DP}/megatron/core/transformer/moe/experts.py", 830, "forward", "x.resize_(0)")]
    s, _ = run(tmp_path, TE_DONE + rc.bridge_failure("RuntimeError", ["Trying to resize storage that is not resizable"],
                                                     other))
    assert (s.outcome, s.error_class) == (CRASHED, "python_error"), s.reason


def test_nccls_own_line_is_the_signature_of_an_unknown_cuda_failure(tmp_path: Path) -> None:
    # NCCL #1528 / #1029 (https://github.com/NVIDIA/nccl/issues/1528, /1029): NCCL's WARN line names the CUDA failure,
    # torch's ncclUnhandledCudaError after it only says a CUDA call failed
    warn = "c76d92cccb6e:72:456 [0] enqueue.cc:58 NCCL WARN Cuda failure 'named symbol not found'"
    torch_err = ["torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
                 "ProcessGroupNCCL.cpp:1197, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version "
                 "2.18.3", "ncclUnhandledCudaError: Call to CUDA function failed."]
    s, rule_retry = run(tmp_path, EAGER12 + [warn] + torch_err + rc.torchrun(1), arm=EAGER)
    assert (s.outcome, s.error_class, s.signature_id) == (CRASHED, "nccl_error", "nccl_cuda_failure"), s.reason
    assert "Cuda failure 'named symbol not found'" in s.signature
    # the WARN line neither earns nor blocks the retry: torch's `Call to CUDA function failed.` decides, as before
    assert s.transient == rule_retry == "ncclUnhandledCudaError"
    g, g_retry = run(tmp_path, TE12 + [warn] + torch_err + rc.torchrun(1), name="graph")
    assert g.signature_id == "nccl_cuda_failure" and g.transient is None and g_retry is None


def test_a_known_cuda_text_on_nccls_line_proves_its_own_class(tmp_path: Path) -> None:
    # docs/megatron-facts.md §5.8 `NCCL WARN Cuda failure 'an illegal memory access was encountered'`
    warn = "gpu-node-01:3601:3650 [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'"
    s, _ = run(tmp_path, EAGER12 + [warn] + rc.torchrun(-6), arm=EAGER)
    assert (s.error_class, s.signature_id) == ("illegal_memory_access", "illegal_memory_access"), s.reason


def test_a_watchdog_timeout_while_graphs_replay_is_not_retried(tmp_path: Path) -> None:
    # NCCL user guide "Using NCCL with CUDA Graphs" (NCCL_GRAPH_MIXING_SUPPORT: captured collectives "have been seen
    # to cause CUDA to deadlock"), vllm #2770, NeMo #13140, Bridge #3517: a hang of replayed collectives repeats
    wd = rc.wd22
    replay, r_retry = run(tmp_path, TE12 + [wd] + rc.torchrun(-6), name="replay")
    assert (replay.outcome, replay.phase, replay.signature_id) == (CRASHED, STEADY, "nccl_watchdog")
    assert replay.transient is None and r_retry is None, replay.reason
    assert "replayed its graphs" in replay.reason
    # the same line in an eager arm, or in a graph arm before its capture: retried once, as before
    eager, e_retry = run(tmp_path, EAGER12 + [wd] + rc.torchrun(-6), arm=EAGER, name="eager")
    assert eager.transient == e_retry == "Watchdog caught collective operation timeout"
    warm, w_retry = run(tmp_path, rc.strip(rc.upto(rc.TE, rc.it(2))) + [wd] + rc.torchrun(-6), name="warm")
    assert warm.phase == WARMUP and warm.transient == w_retry == "Watchdog caught collective operation timeout"


def test_docs_list_each_text_with_its_source_and_id() -> None:
    doc = (ROOT / "docs" / "failures.md").read_text()
    section = doc.split("## Read by their cause", 1)[1].split("\n## ", 1)[0]
    ids = {s.id: s for s in sg.SIGNATURES}
    for c in CASES:
        assert f"`{c.signature_id}`" in section, c.signature_id
        assert ids[c.signature_id].needle.decode() in section, c.signature_id
    assert "`nccl_cuda_failure`" in section and "`nccl_watchdog`" in section
    for url in ("vllm-project/vllm/issues/4432", "NVIDIA/Megatron-LM/issues/7009", "pytorch/pytorch/issues/83148",
                "NVIDIA/TransformerEngine/pull/2376", "NVIDIA/Megatron-LM/pull/6535", "vllm-project/vllm/issues/2770"):
        assert f"https://github.com/{url}" in section, url


def test_a_none_wait_outside_the_p2p_frame_is_the_exception_it_is(tmp_path: Path) -> None:
    # the text is Python's generic one: only through P2PCommunicator._communicate is it the p2p capture failure
    other = rc.FULL_CAPTURE + [(f"{DP}/megatron/core/utils.py", 300, "finish", "handle.wait()")]
    s, _ = run(tmp_path, rc.full_cap + rc.bridge_failure("AttributeError", ["'NoneType' object has no attribute 'wait'"],
                                                         other))
    assert (s.outcome, s.error_class) == (CRASHED, "python_error"), s.reason
