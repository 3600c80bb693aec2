"""`preflight: megatron` asks Megatron Bridge's own validator about every cell of a sweep."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from graphsweep.plan.planner import plan_frame, plan_sweep
from graphsweep.sweepspec.load import load_spec
from graphsweep.records import SpecError
from tests.support import ROOT

TINY = ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml"


def tiny_spec(tmp_path: Path, **changes) -> Path:
    raw = yaml.safe_load(TINY.read_text())
    raw.update({"preflight": "megatron", **changes})
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_megatron_mode_without_a_bridge_python_says_what_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("GRAPHSWEEP_MEGATRON_PYTHON", raising=False)
    with pytest.raises(SpecError, match="workload.bridge_python") as info:
        plan_frame(plan_sweep(load_spec(tiny_spec(tmp_path))))
    assert "tools/megatron-venv.sh" in str(info.value)


@pytest.mark.megatron
@pytest.mark.skipif(not os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON"),
                    reason="GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
def test_bridge_rejects_a_full_iteration_cell_with_the_nan_check_on(tmp_path):
    raw = yaml.safe_load(TINY.read_text())
    overrides = {**raw["workload"].get("overrides", {}), "rerun_state_machine.check_for_nan_in_loss": True}
    spec = load_spec(tiny_spec(tmp_path, preflight="megatron", workload={**raw["workload"], "overrides": overrides}))
    plan = plan_frame(plan_sweep(spec, "slurm"))  # for a cluster: this machine's local executor has no CUDA device
    full = plan[plan.variant == "full_iteration"]
    assert (full.status == "blocked").all()
    assert full.rule_message.str.contains("check_for_nan_in_loss must be disabled").all()
    assert full.rule_id.str.contains("bridge_rejected").all()  # Bridge itself said so, not only our rule
    assert (plan[plan.variant == "attn"].status == "submit").all()  # and it accepts the TE cell
