"""A local executor on a machine without a CUDA device starts no job that only a CUDA device can run (issue 37 item 5):
the builtin's graph arms, and every Megatron run, eager included (Megatron Core trains on CUDA only: the jobs used to
start and end "baseline-failed", `No module named 'torch'`). Blocked at plan time with one rule and the same words;
planned for a cluster, nothing is blocked for it. CUDA_VISIBLE_DEVICES="" makes "no CUDA device" certain on any
machine (planner.cuda_here)."""

from __future__ import annotations

import pytest

from graphsweep.plan.planner import plan_sweep
from graphsweep.sweepspec.load import load_spec
from graphsweep.vocab import EAGER, GRAPH
from graphsweep.workloads.base import NO_CUDA_HERE
from tests.support import ROOT

MEGATRON = ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml"
BUILTIN = ROOT / "configs" / "sweep.yaml"
SAME_WORDS = ("a CUDA device; this machine has none (no NVIDIA driver) and the local executor runs its jobs here: "
              "no job is started for this ")


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def _blocked(spec_path, cluster):
    return {p.run.run_id: (p.run.arm, p.violations) for p in plan_sweep(load_spec(spec_path), cluster) if p.violations}


def test_a_local_megatron_sweep_blocks_every_run_eager_included():
    planned = plan_sweep(load_spec(MEGATRON), "local")
    first = [p for p in planned if p.look == 1]  # the first look's 16 runs; the decision loop's later ones too
    assert len(first) == 16 and not [p for p in planned if p.submitted]
    for p in planned:
        (violation,) = p.violations
        assert violation.rule == NO_CUDA_HERE and SAME_WORDS in violation.message
        what = "CUDA graphs need" if p.run.arm == GRAPH else "megatron_bridge training needs"
        assert violation.message.startswith(f"{what} a CUDA device;")
        assert violation.message.endswith(f"started for this {p.run.arm} arm")


def test_the_builtin_blocks_its_graph_arms_only_with_the_same_words():
    blocked = _blocked(BUILTIN, "local")
    assert blocked and {arm for arm, _ in blocked.values()} == {GRAPH}
    assert all(v.rule == NO_CUDA_HERE and SAME_WORDS in v.message for _, vs in blocked.values() for v in vs)
    assert any(r.arm == EAGER for r in load_spec(BUILTIN).runs())


@pytest.mark.parametrize("spec_path", [MEGATRON, BUILTIN], ids=["megatron", "builtin"])
def test_planned_for_a_cluster_nothing_is_blocked_for_the_device(spec_path):
    assert _blocked(spec_path, "slurm") == {}
