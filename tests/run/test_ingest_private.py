"""Issue 38 item 1: nothing private leaves its file through ingest. A log under source.logs that is a link out of the
folder the spec names (a private file, /proc/self/environ) or no regular file (a device, a pipe) is refused naming
it, before anything is read or written; a link swapped in after the folder was looked at copies nothing; a name with
a terminal escape sequence is shown spelled out (item 6).

Through the real `graphsweep ingest` (which runs the real workflow) on the recorded H200 logs
(tests/fixtures/logs/megatron-h200), and the ingest rule's own function for the race.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from graphsweep import cli
from graphsweep.fileio import UnusableFile
from graphsweep.layout import SweepPaths
from graphsweep.run.ingest import IngestError, match_files, write_run
from graphsweep.sweepspec.load import load_spec
from tests.support import LOGS

H200 = LOGS / "megatron-h200"
SECRET = "root:$6$saltsalt$0123456789abcdefSECRETHASH:19000:0:99999:7:::"


def _folder(tmp: Path, full: str = "copy") -> tuple[Path, Path]:
    """source.logs with eager-1.log (a real log) and full-1.log (a copy of a real graph log unless `full` says
    otherwise), and its spec."""
    logs = tmp / "logs"
    logs.mkdir()
    shutil.copy(H200 / "eager.log", logs / "eager-1.log")
    if full == "copy":
        shutil.copy(H200 / "local_full.log", logs / "full-1.log")
    spec = {"sweep": "private", "workload": {"kind": "megatron_bridge", "recipe": "vanilla_gpt_pretrain_config"},
            "source": {"logs": str(logs), "pattern": r"(?P<variant>eager|full)-(?P<repeat>\d)\.log"},
            "axes": {"train.micro_batch_size": [1]},
            "variants": [{"name": "full", "impl": "local", "scope": ["full_iteration"]}], "repeats": 1}  # fmt: skip
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return logs, path


def _ingest(capsys, tmp: Path, spec: Path) -> tuple[int, str]:
    rc = cli.main(["ingest", str(spec), "--results", str(tmp / "results")])
    return rc, capsys.readouterr().err


def _private(tmp: Path) -> Path:
    secret = tmp / "secret" / "shadow"
    secret.parent.mkdir()
    secret.write_text(f"root:x:0:0\n{SECRET}\n")
    return secret


@pytest.mark.parametrize("target", ["private file", "/proc/self/environ", "/dev/zero"])
def test_a_log_linked_out_of_the_folder_is_refused_and_nothing_is_read(tmp_path, capsys, target):
    logs, spec = _folder(tmp_path, full="link")
    source = _private(tmp_path) if target == "private file" else Path(target)
    (logs / "full-1.log").symlink_to(source)
    rc, err = _ingest(capsys, tmp_path, spec)
    assert rc == 2 and "Traceback" not in err
    assert f"full-1.log: is a link to {source.resolve() if target != '/proc/self/environ' else '/proc/'}" in err
    assert "outside source.logs" in err and SECRET not in err and "PATH=" not in err
    assert not (tmp_path / "results").exists()  # nothing written, nothing copied


@pytest.mark.parametrize("what", ["fifo", "socket"])
def test_a_log_that_is_no_regular_file_is_refused(tmp_path, capsys, what):
    logs, spec = _folder(tmp_path, full="none")
    if what == "fifo":
        os.mkfifo(logs / "full-1.log")  # open() would wait for a writer for ever
    else:
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(logs / "full-1.log"))
    rc, err = _ingest(capsys, tmp_path, spec)
    assert rc == 2 and "full-1.log: is not a regular file" in err
    assert not (tmp_path / "results").exists()


def test_a_log_folder_in_proc_is_refused(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "sweep": "proc", "workload": {"kind": "megatron_bridge", "recipe": "vanilla_gpt_pretrain_config"},
        "source": {"logs": "/proc/self", "pattern": r"(?P<variant>eager|full)(?P<repeat>iron)"},
        "axes": {"train.micro_batch_size": [1]}, "variants": [{"name": "full", "impl": "full_iteration"}],
        "repeats": 1}))  # fmt: skip
    rc, err = _ingest(capsys, tmp_path, spec)
    assert rc == 2 and "source.logs = '/proc/self' is in /proc" in err
    assert not (tmp_path / "results").exists()


def test_a_link_inside_the_folder_is_that_log(tmp_path):
    """A log filed under another name by a link that stays inside source.logs is read as the log it names."""
    logs, spec = _folder(tmp_path, full="none")
    (logs / "kept").mkdir()
    shutil.copy(H200 / "local_full.log", logs / "kept" / "graph.log")
    (logs / "full-1.log").symlink_to(logs / "kept" / "graph.log")
    files = match_files(load_spec(spec)).files
    assert sorted(p.name for ps in files.values() for p in ps) == ["eager-1.log", "full-1.log"]


def test_a_link_swapped_in_after_the_folder_was_looked_at_copies_nothing(tmp_path):
    """The ingest rule's copy opens the log again by its real path and checks what it opened."""
    logs, spec = _folder(tmp_path)
    logmap = match_files(load_spec(spec))
    run_id = next(r for r in logmap.files if ".full." in r)
    (logs / "full-1.log").unlink()
    (logs / "full-1.log").symlink_to(_private(tmp_path))
    run = SweepPaths(tmp_path / "results", "private").run(run_id)
    with pytest.raises(UnusableFile, match="full-1.log: is a link to .*secret/shadow, outside source.logs"):
        write_run(run, logmap.files[run_id], root=logmap.root)
    assert not run.log.exists() and not run.run_json.exists()


@pytest.mark.slow
@pytest.mark.snakemake
def test_an_ingested_run_records_the_file_it_read(tmp_path, capsys):
    logs, spec = _folder(tmp_path)
    rc, err = _ingest(capsys, tmp_path, spec)
    assert rc == 0, err
    run_jsons = list((tmp_path / "results" / "private" / "runs").glob("*/run.json"))
    records = [yaml.safe_load(p.read_text()) for p in run_jsons]
    assert sorted(Path(r["source_files"][0]["path"]).name for r in records) == ["eager-1.log", "full-1.log"]
    assert all(len(r["source_files"][0]["sha256"]) == 64 for r in records)
    log = next(p.parent / "log.txt" for p in run_jsons if ".full." in p.parent.name)
    assert log.read_bytes() == (H200 / "local_full.log").read_bytes()


def test_a_file_name_with_an_escape_sequence_is_spelled_out(tmp_path):
    logs, spec = _folder(tmp_path)
    shutil.copy(H200 / "eager.log", logs / "full\x1b[2J\x1b]0;owned\x07-1.log")
    raw = yaml.safe_load(spec.read_text())
    raw["source"]["pattern"] = r"(?P<variant>eager|full.*)-(?P<repeat>\d)\.log"
    spec.write_text(yaml.safe_dump(raw))
    with pytest.raises(IngestError) as exc:
        match_files(load_spec(spec))
    text = str(exc.value)
    assert "\x1b" not in text and "\x07" not in text
    assert "full\\x1b[2J\\x1b]0;owned\\x07-1.log" in text
