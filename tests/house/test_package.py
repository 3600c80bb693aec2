"""The package stands alone: the wheel ships its schemas and validates a spec outside any checkout, and no plan holds
the path of the Python that made it (a moved or re-made venv re-queues nothing; tests/workflow/test_workflow.py checks
that on a finished sweep with Snakemake)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from graphsweep import resources
from graphsweep.plan.planner import plan_sweep
from graphsweep.entry.job import job_main, own_interpreter
from graphsweep.sweepspec.load import load_spec
from graphsweep.vocab import PYTHON
from tests.support import ROOT

SPECS = [ROOT / "configs" / "sweep.yaml", *sorted((ROOT / "configs" / "examples").glob("*.yaml"))]


def _configs(spec: Path) -> dict[str, str]:
    return {p.run.run_id: json.dumps(p.config(), sort_keys=True, default=str) for p in plan_sweep(load_spec(spec))}


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_no_plan_names_the_controllers_interpreter(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run's config.yaml (Snakemake's params) is the same whichever Python plans it."""
    here = _configs(spec)
    monkeypatch.setattr(sys, "executable", "/moved/venv/bin/python")
    assert _configs(spec) == here
    assert not any(sys.prefix in c or "/moved/" in c for c in here.values())


def test_builtin_and_pair_commands_name_a_stable_python() -> None:
    planned = plan_sweep(load_spec(ROOT / "configs" / "sweep.yaml"))
    assert {p.launch.argv[:3] == [PYTHON, "-m", "graphsweep.entry.builtin_gpt"] for p in planned} == {True}
    paired = plan_sweep(load_spec(ROOT / "configs" / "examples" / "megatron-tiny-moe-paired.yaml"))
    assert {p.launch.argv[:3] == [PYTHON, "-m", "graphsweep.entry.abba"] for p in paired} == {True}


def test_the_job_runs_graphsweeps_own_programs_with_its_own_interpreter(tmp_path: Path) -> None:
    assert own_interpreter([PYTHON, "-m", "graphsweep.entry.abba", "--order"]) == [sys.executable, "-m",
                                                                                "graphsweep.entry.abba", "--order"]
    for other in (["python", "-m", "torch.distributed.run"], ["/opt/py/bin/python", "-m", "graphsweep.x"],
                  ["python", "/repo/graphsweep/entry/megatron_entry.py"], ["srun", "python", "-m", "graphsweep.x"]):
        assert own_interpreter(other) == other  # the user's interpreter, or a script inside the container
    # a PATH without any `python`: the plan's `python -m graphsweep...` still starts, with this interpreter
    log = tmp_path / "log.txt"
    facts = job_main([PYTHON, "-m", "graphsweep.vocab"], {"PATH": str(tmp_path)}, str(log))
    assert facts["exit_code"] == 0, log.read_text()
    facts = job_main([PYTHON, "-c", "pass"], {"PATH": str(tmp_path)}, str(log))  # not graphsweep's: as planned
    assert facts["exit_code"] == 127 and "launch error" in log.read_text()


def test_schemas_are_package_data() -> None:
    for name in (resources.SWEEP_SCHEMA, resources.CONFIG_SCHEMA):
        assert yaml.safe_load(resources.read_text(name))["$schema"].startswith("https://json-schema.org/")
        assert resources.data_file(name).parent == ROOT / "graphsweep" / "schemas"
    assert resources.checkout() == ROOT and resources.workflow_dir() == ROOT


@pytest.mark.slow
def test_the_wheel_installs_and_validates_a_spec_outside_the_repository(tmp_path: Path) -> None:
    """`pip install` of the built wheel (not -e) into a fresh venv, then `graphsweep check-spec` in a folder that is
    no checkout: the schema, the defaults and the preflight rules all come from the installed package."""
    src = tmp_path / "src"  # the package alone: pip builds in the source tree, so not in this checkout
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src / "pyproject.toml")
    for package in ("graphsweep", "snakemake_executor_plugin_graphsweep"):  # one distribution, both packages
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)], check=True,
                   timeout=300)
    (wheel,) = dist.glob("graphsweep-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"graphsweep/schemas/sweep.schema.yaml", "graphsweep/schemas/config.schema.yaml",
            "graphsweep/report/templates/report.css", "graphsweep/report/templates/report.html.j2",
            "graphsweep/report/templates/report.md.j2", "snakemake_executor_plugin_graphsweep/__init__.py",
            f"graphsweep/{resources.BRIDGE_CATALOGUE}"} <= set(names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--quiet", "install", str(wheel)], check=True, timeout=600)

    user = tmp_path / "elsewhere"  # a user's folder: no Snakefile, no configs/, no graphsweep/ beside it
    user.mkdir()
    shutil.copy(ROOT / "configs" / "examples" / "megatron-tiny-vanilla-gpt.yaml", user / "spec.yaml")
    graphsweep = str(venv / "bin" / "graphsweep")
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv's graphsweep, not a checkout's
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import graphsweep.resources as r; "
                            "print(r.SOURCE_ROOT, r.checkout())"], cwd=user, capture_output=True, text=True, check=True,
                           env=bare)  # fmt: skip
    assert where.stdout.split() == [str(venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" /
                                        "site-packages"), "None"]
    ok = subprocess.run([graphsweep, "check-spec", "--json", "spec.yaml"], cwd=user, capture_output=True, text=True,
                        timeout=120, env=bare)
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    mine = json.loads(subprocess.run([sys.executable, "-m", "graphsweep.cli", "check-spec", "--json",
                                      str(user / "spec.yaml")], capture_output=True, text=True, check=True).stdout)
    assert out == mine and out["ok"] and out["runs"] > 0  # the same plan and preflight verdicts as the checkout's
    (user / "bad.yaml").write_text((user / "spec.yaml").read_text() + "\nwarmpu: 3\n")
    bad = subprocess.run([graphsweep, "check-spec", "bad.yaml"], cwd=user, capture_output=True, text=True, timeout=120,
                         env=bare)
    assert bad.returncode == 2 and "warmpu" in bad.stderr and "unknown key" in bad.stderr, bad.stderr
