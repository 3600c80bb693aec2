"""Issue 38 item 8: what `graphsweep compare --reference` takes. A reference that is also an --eager log is refused
naming it and both options; a graph run's log (capture and replay lines) is refused as a reference, not counted into
the loss band; an empty or cut reference is left out and said so. On the recorded H200 logs
(tests/fixtures/logs/megatron-h200), through the real CLI.
"""

from __future__ import annotations

import json
import shutil

import pytest

from graphsweep import cli
from tests.support import LOGS

H200 = LOGS / "megatron-h200"


def run_cli(capsys, *argv: object) -> tuple[int, str, str]:
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _compare(capsys, *reference: object, json_out: bool = False) -> tuple[int, str, str]:
    return run_cli(capsys, "compare", *(["--json"] if json_out else []), "--eager", H200 / "eager.log", "--graph",
                   H200 / "local_full.log", *(["--reference", *reference] if reference else []))  # fmt: skip


def test_a_reference_that_is_also_an_eager_log_is_refused_naming_it(capsys):
    rc, out, err = _compare(capsys, H200 / "eager.log")
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"a log is given twice: {H200 / 'eager.log'} to --eager and to --reference" in err


@pytest.mark.parametrize("graph_log", ["te_attn.log", "local_full.log"])
def test_a_graph_runs_log_is_refused_as_a_reference(capsys, tmp_path, graph_log):
    """Its capture and replay lines say it is a graph run; counted as a reference it widened the loss band."""
    ref = tmp_path / graph_log
    shutil.copy(H200 / graph_log, ref)  # another file: not refused as the --graph log given twice
    rc, out, err = _compare(capsys, ref)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert f"--reference {ref}: not an eager run (eager arm shows CUDA-graph capture (" in err


def test_an_eager_reference_still_counts(capsys, tmp_path):
    ref = tmp_path / "aa.log"
    shutil.copy(H200 / "eager.log", ref)
    rc, out, err = _compare(capsys, ref, json_out=True)
    assert rc == 0, err
    got = json.loads(out)
    assert got["references_excluded"] == [] and "2 reference runs" in got["reason"]


@pytest.mark.parametrize("content", ["", "cut"])
def test_an_empty_or_cut_reference_is_left_out_and_said_so(capsys, tmp_path, content):
    ref = tmp_path / "ref.log"
    text = (H200 / "eager.log").read_text()
    ref.write_text("" if content == "" else text[: text.index(" iteration        5/")])
    rc, out, err = _compare(capsys, ref)
    assert rc == 0, err
    (line,) = [ln for ln in out.splitlines() if ln.startswith("reference ")]
    assert line.startswith(f"reference {ref} excluded: ")
    assert "empty log" in line if content == "" else "excluded: " in line
    rc, out, _ = _compare(capsys, ref, json_out=True)
    got = json.loads(out)
    (excluded,) = got["references_excluded"]
    assert excluded["log"] == str(ref) and excluded["outcome"] != "completed"
    alone = json.loads(_compare(capsys, json_out=True)[1])  # judged as if it had not been given
    assert (got["verdict"], got["speedup"], got["reason"]) == (alone["verdict"], alone["speedup"], alone["reason"])
