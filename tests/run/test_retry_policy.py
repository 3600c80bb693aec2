"""The run rule's one automatic retry (graphsweep/run/runrule.py execute_run), through real submitit jobs.

Each job (submitit's local executor, the run rule's own path: config.yaml -> submitit -> job_main -> run.json)
prints a real H200 Megatron Bridge log (tests/fixtures/logs/megatron-h200) with a failure text appended, then exits 1,
as a failing training would. The policy (docs/failures.md) decides from the log and the run's arm: a network fault is
retried once in any arm; a graph arm's CUDA error and an NCCL timeout during a capture are not. A retry that fails
the same way is recorded with both attempts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from graphsweep.parse.run import parse_run
from graphsweep.run.runrule import execute_run
from graphsweep.layout import RunDir
from graphsweep.vocab import CRASHED, EAGER, GRAPH
from tests.fixtures.field import recipe as rc

EAGER12 = rc.strip(rc.upto(rc.EAGER, rc.it(12)))
TE12 = rc.strip(rc.upto(rc.TE, rc.it(12)))
NETWORK = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
           "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use")  # docs/megatron-facts.md §5.8
IMA = ["torch.AcceleratorError: CUDA error: an illegal memory access was encountered"] + \
    rc.cuda_msg("an illegal memory access was encountered", "cudaErrorIllegalAddress")[1:3]  # TE #3316, torch 2.11


def _run(tmp_path: Path, arm: str, lines: list[str]) -> tuple[dict, list[str]]:
    printed = tmp_path / "printed.log"
    printed.write_text("\n".join(lines + rc.torchrun(1)) + "\n")
    cfg = {
        "run": {"run_id": "r1", "arm": arm, "warmup": 3},
        "launch": {"argv": [sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read()); "
                            "sys.exit(1)", str(printed)], "env": {}},
        "executor": {"cluster": "local", "timeout_min": 5},
    }
    run = RunDir(tmp_path)
    run.config.write_text(yaml.safe_dump(cfg))
    said: list[str] = []
    record = execute_run(run, tmp_path / "jobs", say=said.append)
    assert json.loads(run.run_json.read_text())["exit_code"] == 1
    return record, said


@pytest.mark.slow
def test_a_network_fault_is_retried_once_and_a_second_failure_is_the_result(tmp_path: Path) -> None:
    record, said = _run(tmp_path, GRAPH, TE12 + [NETWORK])
    assert any("transient failure (torch.distributed.DistNetworkError); retrying once" in s for s in said), said
    (first,) = record.previous_attempts
    assert first.signature == "torch.distributed.DistNetworkError" and Path(first.log).is_file()
    s = parse_run([tmp_path / "log.txt"], arm=GRAPH, warmup=3, run_info=record.to_dict()).summary
    assert (s.outcome, s.error_class) == (CRASHED, "transient:network")
    assert "failed the same way twice" in s.reason and f"{first.log}:{len(TE12) + 1}" in s.reason


@pytest.mark.slow
@pytest.mark.parametrize("arm,lines,retried", [
    (EAGER, EAGER12 + IMA, True),  # NVIDIA's harness retries a kernel fault of the code it runs
    (GRAPH, TE12 + IMA, False),  # a graph arm's CUDA error is the graph's
    (GRAPH, rc.te_cap + [rc.wd22], False),  # an NCCL timeout while the capture runs is the capture's hang
], ids=["eager illegal memory access", "graph illegal memory access", "watchdog during capture"])
def test_the_retry_follows_the_arm_and_the_capture(tmp_path: Path, arm: str, lines: list[str], retried: bool) -> None:
    record, said = _run(tmp_path, arm, lines)
    assert bool(record.previous_attempts) == retried, said
    assert any("retrying once" in s for s in said) == retried
