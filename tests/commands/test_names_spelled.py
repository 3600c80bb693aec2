"""Issue 38 item 6, the CLI's half: a file's name, a key or a value given on the command line, or a line of a log,
is shown with its control characters spelled out (`\\x1b`) by every `graphsweep` command, on stdout and stderr, in
its refusals as in its results: an escape sequence in a name would clear, recolour or retitle the reader's terminal.
(verify-archive and catalog: tests/store/test_archive_hostile.py; an ingest refusal: tests/run/test_ingest_private.py;
report.md and report.html are the report's.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graphsweep import cli
from tests.support import LOGS, ROOT

ESC = "\x1b[2J\x1b]0;owned\x07"
H200 = LOGS / "megatron-h200"


@pytest.fixture()
def named(tmp_path) -> dict[str, Path]:
    """Files whose names hold an escape sequence: a broken spec, a good one, an eager log, a graph log, an empty log."""
    files = {"bad": tmp_path / f"bad{ESC}.yaml", "good": tmp_path / f"ok{ESC}.yaml", "eager": tmp_path / f"e{ESC}.log",
             "graph": tmp_path / f"g{ESC}.log", "empty": tmp_path / f"empty{ESC}.log"}  # fmt: skip
    files["bad"].write_text("sweep: [\n")
    shutil.copy(ROOT / "configs" / "sweep.yaml", files["good"])
    shutil.copy(H200 / "eager.log", files["eager"])
    shutil.copy(H200 / "local_full.log", files["graph"])
    files["empty"].write_text("")
    files["missing"] = tmp_path / f"missing{ESC}.log"
    return files


CASES = {
    "check-spec, broken spec": ["check-spec", "{bad}"],
    "check-spec, good spec": ["check-spec", "{good}"],
    "plan --dry-run, broken spec": ["plan", "--dry-run", "{bad}"],
    "check, a key": ["check", f"model.x{ESC}=1"],
    "check, a value Megatron refuses": ["check", f"model.cuda_graph_impl={ESC}"],
    "ingest, broken spec": ["ingest", "{bad}"],
    "ingest, no source block": ["ingest", "{good}"],
    "parse, a log": ["parse", "{eager}"],
    "parse, an empty log": ["parse", "{empty}"],
    "parse, no such log": ["parse", "{missing}"],
    "compare": ["compare", "--eager", "{eager}", "--graph", "{graph}"],
    "compare, an empty graph log": ["compare", "--eager", "{eager}", "--graph", "{empty}"],
    "compare, an empty reference": ["compare", "--eager", "{eager}", "--graph", "{graph}", "--reference", "{empty}"],
    "compare, no such log": ["compare", "--eager", "{eager}", "--graph", "{missing}"],
    "status, no such sweep": ["status", "{missing}"],
    "more-repeats, broken spec": ["more-repeats", "{bad}"],
    "verify-archive, no such file": ["verify-archive", "{missing}"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_command_spells_out_control_characters(capsys, named, case):
    argv = [a.format(**{k: str(v) for k, v in named.items()}) for a in CASES[case]]
    cli.main(argv)
    out, err = capsys.readouterr()
    assert out + err, "the command said nothing"
    assert not any(ch in out + err for ch in ("\x1b", "\x07", "\x9b")), (out + err)[:400]
