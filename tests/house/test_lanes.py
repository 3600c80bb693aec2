"""make test's lanes (tests/conftest.py, tests/lane/lanes.py): every test runs in exactly one lane, the lanes' counts
add up or the run fails, a failing lane fails make test, the megatron lane takes the variables .ci/run's build writes,
and the cpu lane refuses a Slurm command from a test without the slurm marker.

Each case runs the real runner and pytest on a small suite in a scratch folder whose conftest.py is the project's own
lane hooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lane import lanes
from tests.support import ROOT

LANES_PY = ROOT / "tests" / "lane" / "lanes.py"

SUITE = '''
import os
import subprocess

import pytest


def test_unit():
    assert {cpu_ok}


@pytest.mark.snakemake
@pytest.mark.slow
def test_workflow():
    pass


@pytest.mark.slurm
def test_cluster():
    pass


@pytest.mark.slurm
@pytest.mark.megatron
def test_live_on_slurm():
    pass


@pytest.mark.megatron
def test_live():
    assert os.environ.get("FROM_BUILD") == "yes"


def test_unmarked_slurm_command():
    with pytest.raises(RuntimeError, match="cpu lane: .*test_unmarked_slurm_command starts `sinfo --version`: mark the "
                                           "test @pytest.mark.slurm"):
        subprocess.run(["sinfo", "--version"], capture_output=True)
'''


def suite(tmp_path: Path, cpu_ok: bool = True) -> Path:
    """A checkout-like folder: the project's lane hooks as its conftest.py, six tests spread over the three lanes."""
    tmp_path.mkdir()
    (tmp_path / "slurm").mkdir()  # as the repository's ./slurm link: `--lane slurm` would read it as a path
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_addoption, pytest_collection_modifyitems, pytest_configure  # noqa: F401\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slurm\n    megatron\n    snakemake\n    slow\n")
    (tmp_path / "test_suite.py").write_text(SUITE.format(cpu_ok=cpu_ok))
    return tmp_path


def run_lanes(folder: Path, env_file: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GRAPHSWEEP_TEST_LANE", "PYTEST_XDIST_WORKER")}
    env.update(PYTHONPATH=str(ROOT), GRAPHSWEEP_MEGATRON_ENV=str(env_file))
    return subprocess.run([sys.executable, str(LANES_PY), "--dir", str(folder), "--workers", "1", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
def test_every_test_runs_in_one_lane_and_the_megatron_lane_takes_the_builds_variables(tmp_path):
    env_file = tmp_path / "megatron.env"
    env_file.write_text("# megatron-venv: exit 0 after 1 s\nFROM_BUILD=yes\n# ci-expect: bridge\n")
    proc = run_lanes(suite(tmp_path / "suite"), env_file)
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:]
    assert "6 tests collected: cpu 3, slurm 1, megatron 2" in out
    assert "[cpu] " in out and "[cpu] 1 worker [3 items]" in out  # the lanes' own lines, prefixed with their names
    assert "[megatron] " in out and "[megatron] 1 worker [2 items]" in out
    assert "megatron: " + str(env_file) + " sets FROM_BUILD=yes" in out
    assert "make test: every lane passed" in out
    for lane in ("cpu", "slurm", "megatron"):  # a timed line each, with its CPU
        assert any(line.startswith("[lanes +") and f"] {lane}: passed in " in line and " s CPU (" in line
                   for line in out.splitlines()), lane


@pytest.mark.slow
def test_a_failing_lane_fails_make_test_after_every_lane_ran(tmp_path):
    env_file = tmp_path / "megatron.env"
    env_file.write_text("FROM_BUILD=yes\n")
    proc = run_lanes(suite(tmp_path / "suite", cpu_ok=False), env_file)
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert "cpu: FAILED (pytest exit 1)" in proc.stdout
    assert "megatron: passed in " in proc.stdout  # the other lanes still ran
    assert proc.stdout.rstrip().splitlines()[-1].split("] ", 1)[1].startswith("make test: FAILED: cpu after ")


def _record(lane: str, kept: int, per_lane: dict[str, int]) -> dict:
    return {"lane": lane, "collected": sum(per_lane.values()), "kept": kept, "per_lane": per_lane}


def test_lane_counts_that_do_not_add_up_are_named(tmp_path):
    per_lane = {"cpu": 10, "slurm": 2, "megatron": 1}
    runs = [lanes.Lane(name, []) for name in per_lane]

    def write(records):
        for r in records:
            (tmp_path / f"{r['lane']}.json").write_text(json.dumps(r))

    write([_record(name, n, per_lane) for name, n in per_lane.items()])
    assert lanes.count_problems(tmp_path, runs) == []
    write([_record("cpu", 9, per_lane)])  # a test of the cpu lane deselected some other way
    assert lanes.count_problems(tmp_path, runs) == ["cpu: kept 9 of the 10 tests of its lane",
                                                    "12 tests in the lanes, 13 collected"]
    write([_record("cpu", 11, {**per_lane, "cpu": 11})])  # another suite (a file added between two collections)
    assert lanes.count_problems(tmp_path, runs)[0].startswith("the lanes collected different suites")
    (tmp_path / "slurm.json").unlink()
    assert lanes.count_problems(tmp_path, runs) == [f"slurm: wrote no count ({tmp_path / 'slurm.json'}): did its "
                                                    "collection fail?"]


def test_the_builds_env_file_is_key_value_lines(tmp_path):
    path = tmp_path / "megatron.env"
    path.write_text("# megatron-venv: exit 0\n\nGRAPHSWEEP_MEGATRON_PYTHON=/v/bin/python\nGRAPHSWEEP_CORE_RELEASES=/r\n")
    assert lanes.env_from_file(path) == {"GRAPHSWEEP_MEGATRON_PYTHON": "/v/bin/python", "GRAPHSWEEP_CORE_RELEASES": "/r"}
    path.write_text("GRAPHSWEEP_MEGATRON_PYTHON /v/bin/python\n")
    with pytest.raises(SystemExit, match="not KEY=VALUE: 'GRAPHSWEEP_MEGATRON_PYTHON /v/bin/python'"):
        lanes.env_from_file(path)
