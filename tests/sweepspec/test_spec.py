"""Sweep spec: expansion into shapes, cells and runs; every kind of bad spec names file, key and value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from graphsweep.sweepspec.load import load_spec
from graphsweep.records import SpecError

BASE = {
    "sweep": "t",
    "workload": {"kind": "builtin"},
    "axes": {"hidden": [64, 128], "micro_batch": [1, 2]},
    "fixed": {"layers": 2, "heads": 4, "seq_length": 32},
    "variants": [{"impl": "full_iteration"}, {"impl": "transformer_engine", "scope": ["attn"]}],
    "repeats": 2,
}


def write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_cross_product_with_exclude_and_shared_baselines(tmp_path):
    spec = load_spec(write(tmp_path, {**BASE, "exclude": [{"hidden": 128, "micro_batch": 2}]}))
    assert [s for s in spec.shapes()] == [
        {"hidden": 64, "micro_batch": 1},
        {"hidden": 64, "micro_batch": 2},
        {"hidden": 128, "micro_batch": 1},
    ]
    # the decision loop plans every cell to its budget (decide.max_repeats, 8 by default) and submits the first 2
    looped = spec.runs()
    assert len(looped) == 3 * (8 + 2 * 8) and spec.decide.max_repeats == 8 and spec.repeats == 2
    once = load_spec(write(tmp_path, {**BASE, "exclude": [{"hidden": 128, "micro_batch": 2}],
                                      "decide": {"enabled": False}}))
    runs = once.runs()
    # per shape: 2 eager repeats shared by both variants + 2 variants x 2 repeats
    assert len(runs) == 3 * (2 + 2 * 2)
    assert {r.run_id for r in runs} == {r.run_id for r in looped if r.repeat <= 2}
    assert len(once.cells()) == 3 * 2
    eager = [r for r in runs if r.arm == "eager"]
    assert len(eager) == 6
    cell = once.cells()[0]
    assert cell.eager_run_ids == tuple(r.run_id for r in eager[:2])
    assert len({r.run_id for r in runs}) == len(runs)


def test_ids_are_stable_and_adding_an_axis_value_only_adds_runs(tmp_path):
    before = {r.run_id for r in load_spec(write(tmp_path, BASE)).runs()}
    wider = {**BASE, "axes": {**BASE["axes"], "hidden": [64, 128, 256]}}
    after = {r.run_id for r in load_spec(write(tmp_path, wider)).runs()}
    assert before < after
    # a change that alters what every run does (more iterations) gives new ids
    longer = {r.run_id for r in load_spec(write(tmp_path, {**BASE, "iterations": 50})).runs()}
    assert not (before & longer)


def test_local_full_iteration_is_the_same_variant_as_full_iteration(tmp_path):
    spec = load_spec(write(tmp_path, {**BASE, "variants": [{"impl": "local", "scope": ["full_iteration"]}]}))
    assert spec.variants[0].impl == "full_iteration" and spec.variants[0].name == "full_iteration"


@pytest.mark.parametrize(
    "change, key, value_text, problem",
    [
        ({"bogus": 1}, "bogus", "1", "unknown key"),
        ({"repeats": "three"}, "repeats", "'three'", "wrong type"),
        ({"axes": {"hidden": []}}, "axes.hidden", "[]", "must not be empty"),
        ({"sweep": "../etc"}, "sweep", "'../etc'", "unsafe sweep name"),
        (
            {"variants": [{"impl": "full_iteration"}, {"impl": "local", "scope": ["full_iteration"]}]},
            "variants.1",
            "local",
            "duplicate variant",
        ),
        ({"variants": [{"impl": "local", "scope": ["attn"]}]}, "variants.0.scope", "attn", "only with scope [full_iteration]"),
        ({"variants": [{"impl": "transformer_engine"}]}, "variants.0.scope", "[]", "needs a scope"),
        ({"axes": {"hidden": [64], "depth": [2]}}, "axes.depth", "[2]", "no setting 'depth'"),
        ({"exclude": [{"vocab": 5}]}, "exclude.0.vocab", "5", "not an axis"),
        ({"exclude": [{"hidden": 64}, {"hidden": 128}]}, "exclude", "hidden", "every shape is excluded"),
        ({"workload": {"kind": "pytorch"}}, "workload.kind", "'pytorch'", "must be one of"),
    ],
)
def test_bad_spec_names_file_key_and_value(tmp_path, change, key, value_text, problem):
    path = write(tmp_path, {**BASE, **change})
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert str(path) in message
    assert f"key '{key}'" in message
    assert value_text in message
    assert problem in message


@pytest.mark.slow
def test_check_spec_cli_fails_with_the_message_and_exit_2(tmp_path):
    path = write(tmp_path, {**BASE, "repeats": 0})
    proc = subprocess.run([sys.executable, "-m", "graphsweep.cli", "check-spec", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert str(path) in proc.stderr and "key 'repeats'" in proc.stderr and "0" in proc.stderr


@pytest.mark.slow
def test_check_spec_cli_accepts_the_default_sweep(repo_root):
    proc = subprocess.run(
        [sys.executable, "-m", "graphsweep.cli", "check-spec", "--json", str(repo_root / "configs/sweep.yaml")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"ok": true' in proc.stdout and '"cells": 12' in proc.stdout


def test_yaml_syntax_error_is_named(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("sweep: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML") as info:
        load_spec(path)
    assert str(path) in str(info.value)


def test_include_adds_shapes_with_their_own_settings(tmp_path):
    spec = load_spec(
        write(tmp_path, {**BASE, "include": [{"hidden": 2048, "micro_batch": 8, "mem_fraction": 0.05}]})
    )
    shapes = spec.shapes()
    assert shapes[-1] == {"hidden": 2048, "micro_batch": 8, "mem_fraction": 0.05}
    capped = [r for r in spec.runs() if r.shape.get("mem_fraction")]
    assert capped and all(r.settings["mem_fraction"] == 0.05 and r.settings["layers"] == 2 for r in capped)
    with pytest.raises(SpecError, match="needs a value for every axis"):
        load_spec(write(tmp_path, {**BASE, "include": [{"hidden": 2048}]}))
