"""A megatron_bridge spec's keys and recipe are checked against the catalogue of Megatron Bridge 0.6.2 / Core 0.19.2
(issue 37 item 1): a typo exits 2 naming the key, its file and the closest real key, where it passed check-spec before
(`recipe: llama3_8b_pretrain_confg`, `model.context_paralel_size: 1` in the Llama 3 8B example). The catalogue is
package data made by tools/bridge_catalogue.py from the imported dataclasses; with the Megatron venv the test makes it
again and compares."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from graphsweep import cli, resources
from graphsweep.constraints.graph import GRAPH_FIELDS
from graphsweep.sweepspec.load import load_spec
from graphsweep.workloads import bridge_keys
from graphsweep.workloads.megatron_bridge import NAN_KEYS, RNG_KEYS, WINDOW_KEYS
from tests.support import ROOT

LLAMA = ROOT / "configs" / "examples" / "megatron-llama3-8b-dense.yaml"
EXAMPLES = sorted(p for p in (ROOT / "configs" / "examples").glob("*.yaml")
                  if yaml.safe_load(p.read_text())["workload"]["kind"] == "megatron_bridge")
CATALOGUE = ROOT / "graphsweep" / resources.BRIDGE_CATALOGUE


def edited(tmp_path: Path, old: str, new: str, text: str | None = None) -> Path:
    """The Llama 3 8B example with one line edited, as a user's typo would leave it."""
    text = text if text is not None else LLAMA.read_text()
    assert old in text, old
    path = tmp_path / "spec.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def check_spec(capsys, path: Path) -> tuple[int, str, str]:
    rc = cli.main(["check-spec", str(path)])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(rc: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, err)
    return lines[0]


def test_a_misspelt_recipe_names_the_real_one(tmp_path, capsys):
    path = edited(tmp_path, "recipe: llama3_8b_pretrain_config", "recipe: llama3_8b_pretrain_confg")
    line = one_line(*check_spec(capsys, path)[::2])
    assert line.startswith(f"graphsweep: invalid sweep spec: {path}: key 'workload.recipe' = "
                           "'llama3_8b_pretrain_confg': not a recipe of Megatron Bridge 0.6.2 / Core 0.19.2")
    assert "did you mean llama3_8b_pretrain_config?" in line


def test_a_misspelt_key_names_its_place_and_the_real_one(tmp_path, capsys):
    path = edited(tmp_path, "model.context_parallel_size: 1", "model.context_paralel_size: 1")
    line = one_line(*check_spec(capsys, path)[::2])
    assert line.startswith(f"graphsweep: invalid sweep spec: {path}: key 'fixed.model.context_paralel_size' = 1: "
                           "not a config key of Megatron Bridge 0.6.2 / Core 0.19.2")
    assert "did you mean model.context_parallel_size?" in line


@pytest.mark.parametrize("where, old, new, key", [
    ("an axis", "  train.micro_batch_size:", "  train.micro_bach_size:", "axes.train.micro_bach_size"),
    ("the workload's overrides", "    checkpoint.save: null", "    checkpoint.sav: null",
     "workload.overrides.checkpoint.sav"),
])  # fmt: skip
def test_every_section_is_checked(tmp_path, capsys, where, old, new, key):
    line = one_line(*check_spec(capsys, edited(tmp_path, old, new))[::2])
    assert f"key '{key}'" in line, where


def test_a_variant_s_overrides_are_checked(tmp_path, capsys):
    spec = yaml.safe_load(LLAMA.read_text())
    spec["variants"][0]["overrides"] = {"model.moe_router_fusoin": True}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    line = one_line(*check_spec(capsys, path)[::2])
    assert "key 'variants.0.overrides.model.moe_router_fusoin'" in line and "did you mean model.moe_router_fusion?" \
        in line


@pytest.mark.parametrize("spec_path", EXAMPLES, ids=lambda p: p.stem)
def test_every_shipped_megatron_spec_passes_and_says_what_was_checked(spec_path, capsys):
    rc, out, err = check_spec(capsys, spec_path)
    assert rc == 0, err
    assert "config keys checked against Megatron Bridge 0.6.2 / Core 0.19.2" in " ".join(out.split()) or \
        "not checked" in out


def test_the_keys_graphsweep_itself_writes_are_in_the_catalogue():
    """The graph fields preflight knows and the keys a sweep sets (the window, the NaN checks, the RNG tracker): if
    the catalogue lacked one, the tool or those names are wrong."""
    cat = bridge_keys.catalogue()
    assert [k for k in (*GRAPH_FIELDS, *NAN_KEYS, *RNG_KEYS, *WINDOW_KEYS) if not cat.knows(k)] == []


def test_the_catalogue_says_where_it_came_from():
    data = json.loads(CATALOGUE.read_text())
    assert data["generated_by"] == "tools/bridge_catalogue.py" and data["modules_not_imported"] == []
    assert data["versions"]["megatron-bridge"] == "0.6.2" and data["versions"]["megatron-core"] == "0.19.2"
    assert len(data["recipes"]) > 500 and len(data["keys"]) > 2000  # 562 and 2,465 in Bridge 0.6.2
    assert "env_vars" in data["open"] and bridge_keys.catalogue().knows("env_vars.NCCL_DEBUG")


def test_what_is_not_checked(tmp_path, capsys):
    typo = edited(tmp_path, "model.context_parallel_size: 1", "model.context_paralel_size: 1").read_text()
    for change, says in (({"preflight": "none"}, "preflight: none"),
                         ({"workload": {"mcore_version": "0.17"}}, "workload.mcore_version 0.17")):
        spec = yaml.safe_load(typo)
        for key, value in change.items():
            spec[key] = {**spec[key], **value} if isinstance(value, dict) else value
        (tmp_path / "other.yaml").write_text(yaml.safe_dump(spec))
        rc, out, err = check_spec(capsys, tmp_path / "other.yaml")
        assert rc == 0 and says in out, err
    assert bridge_keys.recipe_problem("qwen:qwen3_30b_a3b") is None  # the perf harness's names: not catalogued
    assert bridge_keys.key_problem("+model.my_new_field") is None  # Hydra's `+`: a key added on purpose


def test_check_refuses_a_misspelt_key_for_the_catalogue_s_core_only(capsys):
    rc = cli.main(["check", "model.cuda_graph_impl=none", "model.hiden_size=1024"])
    _, err = capsys.readouterr()
    assert "model.hiden_size: not a config key" in one_line(rc, err) and "did you mean model.hidden_size?" in err
    rc = cli.main(["check", "--mcore", "0.17", "model.cuda_graph_impl=none", "model.hiden_size=1024"])
    assert rc == 0 and capsys.readouterr().out.startswith("ok")


def test_load_spec_refuses_it_too(tmp_path):
    path = edited(tmp_path, "model.context_parallel_size: 1", "model.context_paralel_size: 1")
    with pytest.raises(Exception, match="did you mean model.context_parallel_size"):
        load_spec(path)


@pytest.mark.megatron
@pytest.mark.skipif(not os.environ.get("GRAPHSWEEP_MEGATRON_PYTHON"),
                    reason="GRAPHSWEEP_MEGATRON_PYTHON is not set (build: tools/megatron-venv.sh)")
def test_the_committed_catalogue_is_what_the_tool_makes(tmp_path):
    out = tmp_path / "catalogue.json"
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([os.environ["GRAPHSWEEP_MEGATRON_PYTHON"], str(ROOT / "tools" / "bridge_catalogue.py"),
                           str(out)], capture_output=True, text=True, timeout=900, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text()) == json.loads(CATALOGUE.read_text())
