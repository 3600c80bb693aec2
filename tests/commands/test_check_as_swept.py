"""`graphsweep check` judges the settings as typed and as a sweep runs them (issue 37 item 6): a sweep adds the TE
RNG tracker to every graph arm itself (and turns the NaN checks off for a full-iteration graph), so a rule only the
hand-typed command breaks is named with what the sweep adds and what to add by hand. Through the real CLI, checked
against the preflight of the runs a real spec plans."""

from __future__ import annotations

import json

import pytest

from graphsweep import cli
from graphsweep.sweepspec.load import load_spec
from graphsweep.workloads.registry import preflight
from tests.support import ROOT

TINY = ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml"


def run_check(capsys, *argv: str) -> tuple[int, str]:
    rc = cli.main(["check", *argv])
    out, err = capsys.readouterr()
    assert err == ""
    return rc, out


def test_te_scopes_typed_without_the_tracker_say_what_a_sweep_adds_and_what_to_add_by_hand(capsys):
    rc, out = run_check(capsys, "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn,mlp]")
    lines = out.splitlines()
    assert rc == 1  # the typed command is what Megatron would refuse
    assert lines[0] == ("blocked: 1 rule(s) fire as typed; in a sweep none: a sweep adds "
                        "model.use_te_rng_tracker=true rng.te_rng_tracker=true itself")
    assert lines[1].startswith("  te_rng_tracker: Transformer engine's RNG tracker is required for cudagraphs")
    assert lines[3] == ("      met in a sweep, which adds model.use_te_rng_tracker=true rng.te_rng_tracker=true; "
                        "typing the command by hand, add the same")


def test_what_it_says_to_add_is_enough(capsys):
    rc, out = run_check(capsys, "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn,mlp]",
                        "model.use_te_rng_tracker=true", "rng.te_rng_tracker=true")
    assert rc == 0 and out.startswith("ok: ")


def test_a_rule_the_sweep_cannot_meet_stays_blocked_in_a_sweep(capsys):
    rc, out = run_check(capsys, "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn]",
                        "model.recompute_granularity=full", "model.recompute_method=uniform",
                        "model.recompute_num_layers=1")
    first = out.splitlines()[0]
    assert rc == 1 and first.startswith("blocked: 2 rule(s) fire as typed; in a sweep 1 (full_recompute_te_scope)")
    block = out.split("  full_recompute_te_scope:", 1)[1]
    assert "met in a sweep" not in block


def test_full_iteration_names_the_nan_checks_for_its_rule_and_the_tracker_for_its_own(capsys):
    rc, out = run_check(capsys, "model.cuda_graph_impl=local", "model.cuda_graph_scope=[full_iteration]")
    nan, rng = out.split("  full_iteration_nan_check:", 1)[1].split("\n  te_rng_tracker:", 1)
    assert rc == 1 and "in a sweep none" in out.splitlines()[0]
    assert ("adds rerun_state_machine.check_for_nan_in_loss=false ddp.check_for_nan_in_grad=false;" in nan
            and "te_rng" not in nan.split("met in a sweep")[1])
    assert "adds model.use_te_rng_tracker=true rng.te_rng_tracker=true;" in rng


def test_eager_settings_get_no_additions(capsys):
    rc, out = run_check(capsys, "--json", "model.cuda_graph_impl=none")
    assert rc == 0 and json.loads(out)["sweep_adds"] == []


@pytest.mark.parametrize("variant", ["attn", "attn+mlp", "full_iteration"])
def test_in_a_sweep_agrees_with_the_preflight_of_the_runs_a_spec_plans(capsys, variant):
    """The graph switch of each variant, typed as `check` takes it: 'in a sweep' is what planning the spec finds."""
    spec = load_spec(TINY)
    run = next(r for r in spec.runs() if r.variant.name == variant)
    switch = {"attn": ["model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn]"],
              "attn+mlp": ["model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn,mlp]"],
              "full_iteration": ["model.cuda_graph_impl=local", "model.cuda_graph_scope=[full_iteration]"]}[variant]
    rc, out = run_check(capsys, "--json", *switch)
    got = json.loads(out)
    assert not got["ok"] and got["ok_in_sweep"] == (preflight(run) == [])
