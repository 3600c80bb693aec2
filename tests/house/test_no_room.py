"""A full disk (issue 38 item 5, issue 40), in process: a write that finds no room is one NoRoom naming the file it was
writing, whatever wrote it, and the file's last version is untouched; the look before a sweep; the outputs Snakemake
restored after a failed job get their old dates back. The same through real Snakemake runs:
tests/workflow/test_full_disk.py."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from graphsweep import smk
from graphsweep.fileio import NoRoom, replacing, write_bytes
from graphsweep.store.tables import read_table
from tests.support import ROOT


@pytest.mark.parametrize("code, why", [(errno.ENOSPC, "no space left on the device"),
                                       (errno.EFBIG, "the file size limit (ulimit -f) is reached"),
                                       (errno.EDQUOT, "the disk quota is exhausted")])  # fmt: skip
def test_a_writer_that_finds_no_room_names_the_file_and_keeps_the_last_version(tmp_path, code, why):
    target = tmp_path / "runs.parquet"
    target.write_bytes(b"last good")
    with pytest.raises(NoRoom) as exc:
        with replacing(target) as tmp:
            tmp.write_bytes(b"half")
            raise OSError(code, os.strerror(code))  # what pyarrow, json or a copy raise mid-write
    assert str(exc.value).startswith(f"{target}: cannot be written: {why}; its last good version is kept. Free space")
    assert exc.value.errno == code and target.read_bytes() == b"last good"
    assert [p.name for p in tmp_path.iterdir()] == ["runs.parquet"]  # no temp file left behind


def test_other_write_errors_pass_unchanged(tmp_path):
    with pytest.raises(PermissionError):
        with replacing(tmp_path / "x"):
            raise PermissionError(errno.EACCES, "denied")


def test_a_real_file_size_limit_is_one_line(tmp_path):
    """Python ignores SIGXFSZ, so a write past RLIMIT_FSIZE fails with EFBIG: pyarrow's and ours alike."""
    code = ("import resource, sys, pandas as pd\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))\n"
            "from graphsweep.store.tables import write_table\n"
            "from graphsweep.fileio import NoRoom\n"
            "df = pd.read_parquet(sys.argv[1])\n"
            "try:\n    write_table(df, sys.argv[2], 'runs')\nexcept NoRoom as exc:\n    print(exc)\n")  # fmt: skip
    target = tmp_path / "runs.parquet"
    write_bytes(target, (ROOT / "results" / "examples" / "h200-builtin" / "runs.parquet").read_bytes())
    before = target.read_bytes()
    out = subprocess.run([sys.executable, "-c", code, str(target), str(target)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, check=True).stdout  # fmt: skip
    assert out.startswith(f"{target}: cannot be written: the file size limit (ulimit -f) is reached"), out
    assert target.read_bytes() == before and len(read_table(target, "runs")) == 45


def test_the_look_before_a_sweep(tmp_path):
    assert smk.room_problem(tmp_path, 0) is None  # min_free_mb: 0 turns it off
    assert smk.room_problem(tmp_path / "not" / "yet", 1) is None  # the nearest folder that exists is looked at
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    problem = smk.room_problem(tmp_path, (free >> 20) + 1024)
    assert problem and problem.startswith(f"the filesystem of {tmp_path} has ") and "less than min_free_mb" in problem
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
            "from graphsweep.smk import room_problem; print(room_problem(sys.argv[1], 64))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, check=True).stdout  # fmt: skip
    assert out.startswith("the file size limit (ulimit -f) is 1,048,576 bytes, less than min_free_mb (64 MiB)")


def test_an_output_snakemake_restored_gets_its_old_date_back(tmp_path):
    """Snakemake restores a failed job's update() output by copying its backup: a new mtime, which made the last good
    table look newer than the inputs the failed job had (a rerun took it for up to date)."""
    restored, rewritten = tmp_path / "runs.parquet", tmp_path / "comparison.parquet"
    for p in (restored, rewritten):
        p.write_bytes(b"v1")
        os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    before = smk.file_versions([restored, rewritten, tmp_path / "missing"])
    assert set(before) == {str(restored), str(rewritten)}
    restored.write_bytes(b"v1")  # the copy of the backup: same content, a new date
    rewritten.write_bytes(b"v2")  # a job that did write its output
    assert smk.date_restored(before) == [str(restored)]
    assert restored.stat().st_mtime_ns == 1_000_000_000 and rewritten.stat().st_mtime_ns != 1_000_000_000

