"""Issue 22 items 1-2: a failed run is named by its cause, and only a transient cause is retried (docs/failures.md).

Logs are built the way the issue built them: a real Megatron Bridge H200 log (tests/fixtures/logs/megatron-h200/
te_attn.log for a graph arm, eager.log for an eager arm: Bridge 0.6.2 / MCore 0.19.2 / TE 2.20.2 / torch 2.11), cut
where the failure happens, plus the failure text in the form torch 2.11 prints it (tests/fixtures/field/recipe.py
`cuda_msg`: c10/cuda/CUDAException.cpp + CUDAMiscFunctions.cpp, the real form in
fixtures/logs/h200-probe/capture-error-sync.log; Bridge's `Pretrain failed` block, torchrun's report). Each case
says where its text comes from. The run rule's own check (signatures.find_transient, what graphsweep/run/submit.py
asks before it retries) must agree with the parsed summary on every case.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from graphsweep import logformat as lf
from graphsweep.parse import signatures as sg
from graphsweep.parse.matching import matching
from graphsweep.parse.read import find_transient
from graphsweep.parse.retry import retry_table
from graphsweep.parse.signatures import RETRY_POLICIES
from graphsweep.parse.rules import RULES, rules_table
from graphsweep.parse.records import RunSummary
from graphsweep.parse.run import parse_run
from graphsweep.vocab import BLOCKED, CAPTURE, CRASHED, EAGER, GRAPH, STEADY
from tests.support import ROOT
from tests.fixtures.field import recipe as rc

FAILED = {"state": "FAILED", "exit_code": 1}
TE12 = rc.strip(rc.upto(rc.TE, rc.it(12)))  # graph arm, TE `attn` graphs captured at iteration 4, steady since 5
EAGER12 = rc.strip(rc.upto(rc.EAGER, rc.it(12)))
TE_CAP = rc.te_cap  # iterations 1-3, then `Start CUDA Graphs capture...` (iteration 4)


def run(tmp_path: Path, lines: list[str], arm: str = GRAPH, warmup: int = 3, run_info: dict | None = FAILED,
        name: str = "log") -> tuple[RunSummary, str | None]:
    """The parsed summary and the run rule's retry decision for the same log."""
    p = tmp_path / f"{name}.log"
    p.write_text("\n".join(lines) + "\n")
    s = parse_run([p], arm=arm, warmup=warmup, run_info=run_info).summary
    return s, find_transient(p, arm=arm, warmup=warmup)


def never_boilerplate(s: RunSummary) -> None:
    assert s.signature and not lf.is_boilerplate(s.signature), s.signature
    assert "failed (exitcode:" not in s.signature and "ChildFailedError" not in s.signature, s.signature


# ---------------------------------------------------------------------------------------------------------------------
# Item 1: the signature is the cause
@dataclass(frozen=True)
class Case:
    name: str
    source: str  # where the failure text comes from
    lines: list[str]
    outcome: str
    error_class: str
    phase: str
    signature_id: str
    signature: str  # text the signature must contain (the cause, with its cudaError name)


UNJOINED_DOC = "capture sequence contains a fork that was not joined to the primary stream"
UPDATE = ("the graph update was not performed because it included changes which violated constraints specific to "
          "instantiated graph update")
STUCK = ("[rank0]:[E1130 09:40:41.000000000 ProcessGroupNCCL.cpp:1532] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
         "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
         "collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog, "
         "and could be triggered by another thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), "
         "or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout "
         "would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or "
         "disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).")

CASES = [
    # the first log: TE capture, the CUDA Runtime API's description of cudaErrorStreamCaptureUnjoined as the
    # message (the catalogue knows libcudart's own wording, not this one: the enum names the cause)
    Case("te_capture_unjoined_issue_text", "issue 22; CUDA Runtime API cudaErrorStreamCaptureUnjoined description",
         TE_CAP + rc.te_capture_failure("torch.AcceleratorError", rc.cuda_msg(UNJOINED_DOC,
                                                                              "cudaErrorStreamCaptureUnjoined")),
         BLOCKED, "blocked_capture", CAPTURE, "capture_unjoined", f"{UNJOINED_DOC} (cudaErrorStreamCaptureUnjoined)"),
    Case("te_capture_unjoined_cudart", "libcudart 13.0 cudaGetErrorString(cudaErrorStreamCaptureUnjoined); docs/megatron-facts.md §5.8",
         TE_CAP + rc.te_capture_failure("torch.AcceleratorError", rc.cuda_msg(
             "capturing stream has unjoined work", "cudaErrorStreamCaptureUnjoined")),
         BLOCKED, "blocked_capture", CAPTURE, "capture_unjoined",
         "capturing stream has unjoined work (cudaErrorStreamCaptureUnjoined)"),
    # the real probe's order: the cause (a host sync in the capture), then capture_end's invalidated symptom
    Case("capture_sync_then_invalidated", "fixtures/logs/h200-probe/capture-error-sync.log (MLM #5889, #1598)",
         TE_CAP + rc.te_capture_failure("torch.AcceleratorError", rc.nperm, chained=rc.chained),
         BLOCKED, "blocked_capture", CAPTURE, "capture_not_permitted",
         "operation not permitted when stream is capturing (cudaErrorStreamCaptureUnsupported)"),
    # the second log: a CUDA error at graph replay in steady state
    Case("replay_exec_update", "libcudart 13.0 cudaGetErrorString(cudaErrorGraphExecUpdateFailure)",
         TE12 + rc.bridge_failure("torch.AcceleratorError", rc.cuda_msg(UPDATE, "cudaErrorGraphExecUpdateFailure"),
                                  rc.FWD_BWD),
         CRASHED, "graph_replay", STEADY, "graph_exec_update", f"{UPDATE} (cudaErrorGraphExecUpdateFailure)"),
    Case("replay_arg_mismatch", "MCore 0.19.2 cuda_graphs.py L1632 (shape change at replay)",
         TE12 + rc.bridge_failure("AssertionError", ["CUDA graph argument mismatch:", "arg 0: shape (1, 1024) != "
                                  "(1, 2048)"], rc.FWD_BWD),
         CRASHED, "graph_replay", STEADY, "arg_mismatch", "CUDA graph argument mismatch:"),
    # a CUDA error the catalogue has no text for: its text and enum, never the CUDA_LAUNCH_BLOCKING hint
    Case("replay_misaligned_address", "libcudart 13.0 cudaGetErrorString(cudaErrorMisalignedAddress)",
         TE12 + rc.bridge_failure("torch.AcceleratorError", rc.cuda_msg("misaligned address",
                                                                        "cudaErrorMisalignedAddress"), rc.FWD_BWD),
         CRASHED, "cuda_error", STEADY, "cuda_error", "CUDA error: misaligned address (cudaErrorMisalignedAddress)"),
    # the third log: the heartbeat monitor, then SIGABRT: the watchdog's line, not torchrun's -6
    Case("nccl_watchdog_stuck", "torch 2.11 ProcessGroupNCCL.cpp HeartbeatMonitor text (libtorch_cuda.so)",
         TE12 + [STUCK] + rc.torchrun(-6),
         CRASHED, "nccl_error", STEADY, "nccl_watchdog_stuck", "ProcessGroupNCCL's watchdog got stuck for 480"),
    # an exception in the watchdog thread names the CUDA fault under it (a public log: torch 2.x ProcessGroupNCCL)
    Case("watchdog_thread_cuda_error", "ProcessGroupNCCL 'Process group watchdog thread terminated with exception' "
         "(torch 2.11 libtorch_cuda.so); libcudart cudaErrorIllegalAddress",
         TE12 + ["[rank0]:[E1130 09:40:41.298864673 ProcessGroupNCCL.cpp:2057] [PG ID 3 PG GUID 3 Rank 0] Process "
                 "group watchdog thread terminated with exception: CUDA error: an illegal memory access was "
                 "encountered"] + ["[rank0]:" + x for x in rc.cuda_msg("x", "cudaErrorIllegalAddress")[1:]]
         + rc.torchrun(-6),
         CRASHED, "illegal_memory_access", STEADY, "illegal_memory_access",
         "an illegal memory access was encountered (cudaErrorIllegalAddress)"),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_the_signature_is_the_cause_and_a_graph_failure_is_never_retried(tmp_path: Path, c: Case) -> None:
    s, rule_retry = run(tmp_path, c.lines)
    assert (s.outcome, s.error_class, s.phase, s.signature_id) == (c.outcome, c.error_class, c.phase,
                                                                   c.signature_id), s.reason
    assert c.signature in s.signature, s.signature
    never_boilerplate(s)
    assert s.transient is None and rule_retry is None  # a graph arm's CUDA or capture failure is deterministic
    assert "automatic retry" not in s.reason


def test_a_capture_failure_says_where_and_what(tmp_path: Path) -> None:
    s, _ = run(tmp_path, CASES[0].lines)
    assert s.reason.startswith(f"CUDA graph capture failed at capture (iteration 4): CUDA error: {UNJOINED_DOC} "
                               "(cudaErrorStreamCaptureUnjoined)"), s.reason
    replay, _ = run(tmp_path, CASES[3].lines)
    assert replay.reason.startswith("CUDA graph failed at replay, steady (iteration 13), after its capture at "
                                    f"iteration 4: CUDA error: {UPDATE} (cudaErrorGraphExecUpdateFailure)"), replay.reason


GRAPH_FAMILY = [s for s in sg.BY_ENUM.values() if s.rule in (sg.R_CAPTURE, sg.R_REPLAY)]


@pytest.mark.parametrize("wording", ["libcudart", "another"])
@pytest.mark.parametrize("sig", GRAPH_FAMILY, ids=lambda s: s.cuda_enum)
def test_every_graph_error_is_the_graphs_failure_by_its_enum(tmp_path: Path, sig: sg.Signature, wording: str) -> None:
    # every cudaErrorStreamCapture*, cudaErrorCapturedEvent and cudaErrorGraphExecUpdateFailure: by libcudart 13.0's
    # text, and by the enum alone when the text is worded otherwise (another CUDA release, a paraphrase)
    text = sig.needle.decode() if wording == "libcudart" else "a wording this catalogue does not know"
    at_capture = sig.rule == sg.R_CAPTURE
    lines = (TE_CAP + rc.te_capture_failure("torch.AcceleratorError", rc.cuda_msg(text, sig.cuda_enum))) if at_capture \
        else TE12 + rc.bridge_failure("torch.AcceleratorError", rc.cuda_msg(text, sig.cuda_enum), rc.FWD_BWD)
    s, rule_retry = run(tmp_path, lines)
    want = (BLOCKED, "blocked_capture", CAPTURE) if at_capture else (CRASHED, "graph_replay", STEADY)
    assert (s.outcome, s.error_class, s.phase, s.signature_id) == (*want, sig.id), s.reason
    assert s.signature.endswith(f"CUDA error: {text} ({sig.cuda_enum})")
    assert s.transient is None and rule_retry is None


def test_every_capture_enum_of_the_cuda_runtime_is_in_the_catalogue() -> None:
    # libcudart 13.0's cudaError names of graph capture and update (read from libcudart.so.13 of the Megatron venv)
    capture = {"cudaErrorStreamCaptureUnsupported", "cudaErrorStreamCaptureInvalidated", "cudaErrorStreamCaptureMerge",
               "cudaErrorStreamCaptureUnmatched", "cudaErrorStreamCaptureUnjoined", "cudaErrorStreamCaptureIsolation",
               "cudaErrorStreamCaptureImplicit", "cudaErrorCapturedEvent", "cudaErrorStreamCaptureWrongThread"}
    assert {s.cuda_enum for s in GRAPH_FAMILY if s.rule == sg.R_CAPTURE} == capture
    assert {s.cuda_enum for s in GRAPH_FAMILY if s.rule == sg.R_REPLAY} == {"cudaErrorGraphExecUpdateFailure"}


def test_boilerplate_alone_names_no_cause(tmp_path: Path) -> None:
    # a log cut after torch's CUDA help lines (the error line itself lost) and torchrun's report: the help names the
    # enum, the boilerplate is not the signature
    tail = rc.cuda_msg("x", "cudaErrorLaunchFailure")[1:] + rc.torchrun(1)
    s, _ = run(tmp_path, EAGER12 + tail, arm=EAGER)
    assert (s.outcome, s.error_class, s.signature_id) == (CRASHED, "cuda_error", "unspecified_launch"), s.reason
    assert s.signature.startswith("Search for `cudaErrorLaunchFailure'") and not lf.is_boilerplate(s.signature)
    # no error text at all: torch's suffix lines are never the signature
    s, _ = run(tmp_path, EAGER12 + rc.CUDA_TAIL[:2] + rc.torchrun(1), arm=EAGER)
    assert not lf.is_boilerplate(s.signature or ""), s.signature


def test_a_peers_timeout_is_not_the_cause_of_an_exception(tmp_path: Path) -> None:
    # rank 0 raised (Bridge's line names it, no signature explains it); rank 1's watchdog fired 10 minutes later
    died = rc.bridge_failure("RuntimeError", ["The size of tensor a (1024) must match the size of tensor b (2048)"],
                             rc.FWD_BWD, agent=False)
    wd = "[rank1]:" + rc.wd22.split("]:", 1)[1]
    s, rule_retry = run(tmp_path, EAGER12 + died + [wd] + rc.torchrun(1), arm=EAGER)
    assert (s.outcome, s.error_class) == (CRASHED, "python_error"), s.reason
    assert "Pretrain failed on rank=0 with RuntimeError" in s.signature
    assert s.transient is None and rule_retry is None


def test_c10_fatal_lines_are_fatal_lines() -> None:
    # c10 LOG(FATAL) prefixes: torch 2.x `[F<mmdd> <time> <file>:<line>]` and the older `[F <file>:<line>]` of a
    # public Polaris log (`[rank25]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 25] ... watchdog got stuck ...`)
    assert lf.C10_FATAL.search(b"[rank25]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 25] x")
    assert lf.C10_FATAL.search(b"[rank0]:[F1130 09:40:41.000000000 ProcessGroupNCCL.cpp:1581] x")
    assert not lf.C10_FATAL.search(b"[rank0]:[E1130 09:40:41.000000000 ProcessGroupNCCL.cpp:1581] x")


# ---------------------------------------------------------------------------------------------------------------------
# Item 2: transient is a sourced, short list; every entry on a real or public text
def _cuda(text: str, enum: str) -> list[str]:
    return ["torch.AcceleratorError: CUDA error: " + text] + rc.cuda_msg(text, enum)[1:3]


RETRY_TEXTS: dict[str, tuple[list[str], str]] = {
    "ecc": (_cuda("uncorrectable ECC error encountered", "cudaErrorECCUncorrectable"),
            "libcudart 13.0 cudaGetErrorString in torch 2.11's form; Bridge is_flaky_failure"),
    "nvlink_uncorrectable": (_cuda("uncorrectable NVLink error detected during the execution",
                                   "cudaErrorNvlinkUncorrectable"), "libcudart 13.0 cudaGetErrorString"),
    "gpu_off_bus": (["kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen off the bus."],
                    "NVIDIA driver Xid 79 as users post it (forums.developer.nvidia.com/t/xid-79-gpu-has-fallen-off-"
                    "the-bus/359509)"),
    "devices_unavailable": (_cuda("CUDA-capable device(s) is/are busy or unavailable", "cudaErrorDevicesUnavailable"),
                            "libcudart 13.0 cudaGetErrorString; a GPU held by another process"),
    "illegal_memory_access": (_cuda("an illegal memory access was encountered", "cudaErrorIllegalAddress"),
                              "TE #3316 (docs/megatron-facts.md §7.1 row 3); Bridge is_flaky_failure"),
    "nccl_watchdog": ([rc.wd22], "docs/megatron-facts.md §5.8 (MLM #735) in torch 2.11's ProcessGroupNCCL form"),
    "nccl_failed": (["[E ProcessGroupNCCL.cpp:475] Some NCCL operations have failed or timed out. Due to the "
                     "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/"
                     "incomplete data."], "docs/megatron-facts.md §5.8; torch 2.11 WorkNCCL::handleException (libtorch_cuda.so)"),
    "nccl_remote": (["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:"
                     "275, remote process exited or there was a network error, NCCL version 2.21.5",
                     "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
                     "prematurely."], "docs/megatron-facts.md §5.8; torch 2.11 getNcclErrorDetailStr (libtorch_cuda.so)"),
    "nccl_remote_text": (["torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                          "ProcessGroupNCCL.cpp:3690, remote process exited or there was a network error, NCCL "
                          "version 2.28.9"], "libnccl 2.28.9 ncclGetErrorString in torch 2.11's NCCL error"),
    "nccl_unhandled_cuda": (["RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
                             "NCCL version 2.21.5 ncclUnhandledCudaError: Call to CUDA function failed."],
                            "docs/megatron-facts.md §5.8"),
    "cuda_call_failed": (["ncclUnhandledCudaError: Call to CUDA function failed."],
                         "torch 2.11 getNcclErrorDetailStr (libtorch_cuda.so); Bridge is_flaky_failure"),
    "illegal_instruction": (_cuda("an illegal instruction was encountered", "cudaErrorIllegalInstruction"),
                            "libcudart 13.0 cudaGetErrorString; Bridge is_flaky_failure"),
    "unspecified_launch": (_cuda("unspecified launch failure", "cudaErrorLaunchFailure"),
                           "libcudart 13.0 cudaGetErrorString; Bridge is_flaky_failure"),
    "dist_network": (["torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                      "network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address "
                      "already in use"], "docs/megatron-facts.md §5.8; torch 2.11 TCPStore text (libtorch_cpu.so)"),
    "server_socket": (["[W1130 09:10:02.000000000 socket.cpp:759] [c10d] The server socket has failed to listen on "
                       "any local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: "
                       "address already in use"], "torch 2.11 TCPStore text (libtorch_cpu.so) as c10d logs it"),
    "connection_reset": (["RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by "
                          "peer [10.0.0.2]:29500: Connection reset by peer"], "docs/megatron-facts.md §5.8"),
    "zmq": (["zmq.error.ZMQError: Address already in use (addr='tcp://*:5555')"], "Bridge is_flaky_failure (pyzmq)"),
    "hf_hub": (["OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in "
                "the cached files."], "transformers 5.12.1 utils/hub.py L514; Bridge is_flaky_failure"),
}


def test_every_retried_signature_has_a_text_here() -> None:
    assert set(RETRY_TEXTS) == {s.id for s in sg.RUNTIME if s.retry}
    assert all(s.retry in RETRY_POLICIES for s in sg.SIGNATURES if s.retry)


def _retried(s: RunSummary, rule_retry: str | None, line_sigs: set[str]) -> bool:
    assert s.transient == rule_retry, (s.transient, rule_retry)
    assert s.transient is None or s.transient in line_sigs, s.transient  # the retry names a text of the failure
    return s.transient is not None


@pytest.mark.parametrize("sid", sorted(RETRY_TEXTS))
def test_each_transient_text_is_retried_where_the_policy_says(tmp_path: Path, sid: str) -> None:
    sig = next(s for s in sg.RUNTIME if s.id == sid)
    lines, _source = RETRY_TEXTS[sid]
    assert any(sig in matching(line.encode()) for line in lines), sid
    needles = {s.needle.decode() for line in lines for s in matching(line.encode()) if s.retry}
    eager = run(tmp_path, EAGER12 + lines + rc.torchrun(1), arm=EAGER, name="eager")
    graph = run(tmp_path, TE12 + lines + rc.torchrun(1), arm=GRAPH, name="graph")
    assert eager[0].outcome == graph[0].outcome == CRASHED
    never_boilerplate(eager[0])
    assert _retried(*eager, needles), eager[0].reason  # every entry is retried in an eager arm in steady state
    assert "one automatic retry applies" in eager[0].reason
    # a graph arm in steady state replays its graphs: only a node or network fault is worth a rerun there
    assert _retried(*graph, needles) == (sig.retry == sg.RETRY_ANY), graph[0].reason
    if sig.retry == sg.RETRY_EAGER:
        assert "not retried: retried in an eager arm only" in graph[0].reason
    if sig.retry == sg.RETRY_NO_GRAPH:
        # a collective timeout while the graphs replay: the captured collectives' hang (NCCL user guide, vllm #2770)
        assert "not retried: it came while the graph arm replayed its graphs" in graph[0].reason
        # the same timeout while the capture runs is the capture's hang
        at_capture = run(tmp_path, TE_CAP + lines + rc.torchrun(1), arm=GRAPH, name="capture")
        assert at_capture[0].phase == CAPTURE and not _retried(*at_capture, needles), at_capture[0].reason
        assert "not retried: it came during a capture" in at_capture[0].reason
        # before the capture the graph arm runs eager: a timeout there is retried as in an eager arm
        warm = run(tmp_path, rc.strip(rc.upto(rc.TE, rc.it(2))) + lines + rc.torchrun(1), arm=GRAPH, name="warm")
        assert warm[0].phase == "warmup" and _retried(*warm, needles), warm[0].reason


# Bridge's is_flaky_failure entries graphsweep does not retry, each with what it is instead (docs/failures.md)
NOT_TRANSIENT = [
    ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1", None),  # boilerplate: proves nothing
    ("Segmentation fault (core dumped)", "segfault"),
    ("ERROR:megatron.core.rerun_state_machine: found NaN in local grad norm for bucket #0 in backward pass before "
     "data-parallel communication collective", "nan"),  # MLM #5966 (docs/megatron-facts.md §6.1)
    ("double free or corruption (!prev)", "memory_corruption"),
    ("free(): invalid pointer", "memory_corruption"),
    ("malloc(): unaligned tcache chunk detected", "memory_corruption"),
    ("free(): corrupted unsorted chunks", "memory_corruption"),
    ("Fatal glibc error: malloc.c:2599 (sysmalloc): assertion failed", "memory_corruption"),
    ("msgpack.exceptions.ExtraData: Unpack failed: incomplete input", "io_error"),
    ("EOFError: No data left in file", "io_error"),
]


@pytest.mark.parametrize("text,error_class", NOT_TRANSIENT, ids=lambda v: str(v)[:30])
def test_what_bridge_retries_and_graphsweep_does_not(tmp_path: Path, text: str, error_class: str | None) -> None:
    s, rule_retry = run(tmp_path, EAGER12 + [text] + rc.torchrun(1), arm=EAGER)
    assert s.outcome == CRASHED and s.transient is None and rule_retry is None, s.reason
    if error_class:
        assert s.error_class == error_class
    assert not lf.is_boilerplate(s.signature)


def test_a_teardown_failure_is_not_retried(tmp_path: Path) -> None:
    # the measurement is complete: a network error as ranks exit is not worth a rerun
    end = rc.strip(rc.upto(rc.EAGER, "[after training is done]"))
    s, rule_retry = run(tmp_path, end + RETRY_TEXTS["nccl_remote_text"][0] + rc.torchrun(1), arm=EAGER)
    assert (s.outcome, s.phase, s.measurement_usable) == (CRASHED, "teardown", True)
    assert s.transient is None and rule_retry is None
    # after the run's last iteration but before the end marker (destroy_process_group, a checkpoint save): the same
    last = rc.strip(rc.upto(rc.EAGER, rc.it(30)))
    s, rule_retry = run(tmp_path, last + RETRY_TEXTS["nccl_remote_text"][0] + rc.torchrun(1), arm=EAGER)
    assert (s.outcome, s.phase, s.measurement_usable) == (CRASHED, "teardown", True), s.reason
    assert s.transient is None and rule_retry is None


# ---------------------------------------------------------------------------------------------------------------------
# Issue 23 item 3: the rules are one ordered list, and the documentation shows it
def test_every_signature_feeds_a_rule_of_the_list() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert {s.rule for s in sg.SIGNATURES} <= set(names)
    # blocked before OOM before the graph's failures before crashes before the walltime and NaN, as documented
    order = [names.index(n) for n in (sg.R_CONFIG, sg.R_OOM, sg.R_CAPTURE, sg.R_REPLAY, sg.R_IMA, sg.R_NCCL,
                                      sg.R_WALLTIME, sg.R_NAN)]
    assert order == sorted(order)


def test_docs_show_the_rules_and_the_retry_list() -> None:
    doc = (ROOT / "docs" / "failures.md").read_text()
    assert rules_table() in doc
    assert retry_table() in doc
