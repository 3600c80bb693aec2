"""Issue 38 item 5 and issue 40: a results folder with no room for a sweep's files ends in one graphsweep line naming
the file (or the folder) and the fix, never in Snakemake's call listing, and the last good tables stay as they were.

Through the real Snakemake CLI on a real finished sweep (one eager run of the builtin GPT on this CPU). The file size
limit (`ulimit -f`, RLIMIT_FSIZE: Python then gets EFBIG where a full disk gives ENOSPC; both are one `NoRoom` in
graphsweep/fileio.py) stands in for a full disk: it needs no mount and no root.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from graphsweep.layout import SweepPaths
from tests.support import ROOT, copy_workflow, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.snakemake]

SPEC = {
    "sweep": "small", "workload": {"kind": "builtin"}, "axes": {"hidden": [64], "micro_batch": [1]},
    "fixed": {"layers": 1, "heads": 2, "seq_length": 32, "vocab": 128}, "variants": [{"impl": "full_iteration"}],
    "repeats": 1, "warmup": 3, "iterations": 10, "executor": {"cluster": "local", "timeout_min": 5},
}  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("full-disk"))
    (workdir / "configs" / "small.yaml").write_text(yaml.safe_dump(SPEC))
    proc = snakemake(workdir, "--cores", "1", "--config", "spec=configs/small.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return workdir


def _copy(finished: Path, tmp_path: Path) -> tuple[Path, SweepPaths]:
    dest = tmp_path / "wf"
    shutil.copytree(finished, dest, symlinks=True)  # mtimes and .snakemake's records come along
    return dest, SweepPaths(dest / "results", "small")


def _limited(workdir: Path, limit: int, *args: str) -> subprocess.CompletedProcess:
    """snakemake with the file size limit at `limit` bytes, as `ulimit -f` in the user's shell would set it."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--cores", "1", "--config", "spec=configs/small.yaml", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))


def _tables(paths: SweepPaths) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (paths.plan, paths.runs, paths.iterations,
                                                                     paths.comparison, paths.report_md,
                                                                     paths.report_html) if p.exists()}  # fmt: skip


def _ours(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("graphsweep:")]


def test_a_results_folder_without_room_is_refused_before_anything_runs(finished, tmp_path):
    workdir, paths = _copy(finished, tmp_path)
    summary = next(paths.run_dirs.glob("*/summary.json"))
    summary.unlink()  # a job to do: parse, then aggregate, compare and report rewrite every table
    before = _tables(paths)
    proc = _limited(workdir, 1 << 20)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last == ("graphsweep: results 'results': the file size limit (ulimit -f) is 1,048,576 bytes, less than "
                    "min_free_mb (64 MiB) that a table or a log may take: raise it (ulimit -f unlimited); nothing was "
                    "run or changed")
    assert _tables(paths) == before and not summary.exists() and not list((workdir / ".snakemake" / "locks").glob("*"))


def test_a_table_that_finds_no_room_is_one_line_and_the_last_good_ones_stay(finished, tmp_path):
    """The look is off (min_free_mb=0) and the limit lets Snakemake copy the last good iterations.parquet, but not
    the aggregate job write runs.parquet: one line naming it, iterations.parquet as it was, and a rerun with room
    makes both (the restored table is not taken for up to date)."""
    workdir, paths = _copy(finished, tmp_path)
    paths.runs.unlink()
    size = paths.iterations.stat().st_size
    before = _tables(paths)
    proc = _limited(workdir, 40_000, "min_free_mb=0")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert size < 40_000
    ours = _ours(proc)
    assert (f"graphsweep: {paths.runs.relative_to(workdir)}: cannot be written: the file size limit (ulimit -f) is "
            "reached; its last good version is kept. Free space on its filesystem (or raise the limit, or give "
            "another results folder: --config results=DIR), then run again") in ours, proc.stderr[-4000:]
    assert ours[-1].startswith("graphsweep: sweep 'small' stopped: the file size limit (ulimit -f) is 40,000 bytes")
    assert "then carry on (finished runs and the last good tables are kept): cd " in ours[-1]
    assert _tables(paths) == before  # iterations.parquet restored with its content and its date
    again = snakemake(workdir, "--cores", "1", "--config", "spec=configs/small.yaml")
    assert again.returncode == 0, again.stderr[-3000:]
    assert paths.runs.exists() and paths.iterations.stat().st_mtime_ns > before[paths.iterations.name][0]


def test_a_copy_snakemake_cannot_make_ends_in_graphsweeps_line(finished, tmp_path):
    """The limit is below the last good runs.parquet: Snakemake's own copy of it (update()) fails inside Snakemake,
    which then runs neither onsuccess nor onerror; the controller still ends with graphsweep's line."""
    workdir, paths = _copy(finished, tmp_path)
    next(paths.run_dirs.glob("*/summary.json")).unlink()
    before = _tables(paths)
    proc = _limited(workdir, 30_000, "min_free_mb=0")
    assert proc.returncode != 0, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("graphsweep: sweep 'small' stopped: the file size limit (ulimit -f) is 30,000 bytes"), \
        proc.stderr[-3000:]
    assert {k: v for k, v in _tables(paths).items()} == before
