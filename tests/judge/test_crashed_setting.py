"""A setting that crashes is never recommended (issue 40): a graph variant one of whose runs died of the graph's own
cause is `failed`, naming the run and its cause, in the workflow and in `graphsweep compare`; only what the failure
taxonomy calls infrastructure (docs/failures.md: a node or network fault the retry policy retries) is excluded.

Held-out case, rebuilt from the committed builtin sweep (results/examples/h200-builtin, real H200 runs): the
launch-bound shape's full_iteration run r3 died of `CUDA error: an illegal memory access was encountered`. Before:
the report said `use full_iteration: 6.9x ...` (the crash only in the cell's `excluded 1 run(s)`), `graphsweep
compare` said `speedup 6.98x (3+2 jobs)`. The crashed log is the real r3 log cut after iteration 12, followed by what
torch 2.11 prints when a CUDA call fails (c10_cuda_check_implementation; the real form of that text:
tests/fixtures/logs/h200-probe/capture-error-sync.log) raised at the builtin trainer's `sync()` after a replay.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from graphsweep.cli import main as graphsweep
from graphsweep.judge import compare as jc
from graphsweep.judge import verdict as vd
from graphsweep.report.data import load_tables
from graphsweep.report.write import markdown_of
from graphsweep.vocab import FAILED, SPEEDUP
from tests.support import ROOT, reparsed_sweep

BUILTIN = ROOT / "results/examples/h200-builtin"
LB = "h256-nh4-l4-s128-mb1-b444f4"  # the launch-bound shape: full_iteration 6.9x in the committed sweep
TRAINER = "/tmp/proj/graphsweep/entry/builtin_gpt.py"
TORCH = "/opt/torch/.venv/lib/python3.12/site-packages/torch"


def cuda_error(text: str, enum: str) -> str:
    """A Python traceback through the builtin trainer's sync() after a replay, ending in torch 2.11's CUDA error."""
    return "\n".join([
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "<frozen runpy>", line 88, in _run_code',
        f'  File "{TRAINER}", line 318, in <module>', "    sys.exit(main())",
        f'  File "{TRAINER}", line 314, in main', "    train(cfg, device, dtype)",
        f'  File "{TRAINER}", line 271, in train', "    sync()",
        f'  File "{TORCH}/cuda/__init__.py", line 1083, in synchronize', "    return torch._C._cuda_synchronize()",
        f"torch.AcceleratorError: CUDA error: {text}",
        f"Search for `{enum}' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more "
        "information.",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
        "incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", "", ""])


def crashed_log(dst: Path, text: str = "an illegal memory access was encountered",
                enum: str = "cudaErrorIllegalAddress") -> Path:
    """Run r3's real log cut after iteration 12 (its process died in iteration 13), then the CUDA error."""
    out = []
    for line in (BUILTIN / "runs" / f"{LB}.full_iteration.r3" / "log.txt").read_text().splitlines(True):
        m = re.search(r"\] iteration\s+(\d+)/", line)
        if m and int(m.group(1)) > 12:
            break
        out.append(line)
    dst.write_text("".join(out) + cuda_error(text, enum))
    return dst


def logs(variant: str) -> list[str]:
    return [str(BUILTIN / "runs" / f"{LB}.{variant}.r{k}" / "log.txt") for k in (1, 2, 3)]


def test_graphsweep_compare_fails_a_setting_with_a_crashed_run(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    crash = str(crashed_log(tmp_path / "r3.log"))
    assert graphsweep(["compare", "--json", "--warmup", "3", "--eager", *logs("eager"), "--graph",
                       *logs("full_iteration")[:2], crash]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["verdict"], out["paired_outcome"], out["failure_run_id"]) == (FAILED, vd.GRAPH_CRASHED, crash)
    assert out["crashed_run_ids"] == [crash] and out["failure_class"] == "illegal_memory_access"
    assert out["reason"].startswith(f"1 of 3 graph runs crashed of the graph's own cause: run {crash}: crashed at "
                                    "steady (iteration 13)")
    assert "an illegal memory access was encountered (cudaErrorIllegalAddress)" in out["reason"]
    assert out["speedup"] > 5 and out["reason"].endswith("not a result")  # the other two runs' figures, for the reader


def test_the_workflow_fails_it_and_the_recommendation_moves_on(tmp_path: Path) -> None:
    runs, its = reparsed_sweep(BUILTIN, tmp_path / "t", {f"{LB}.full_iteration.r3": crashed_log(tmp_path / "r3.log")})
    out = tmp_path / "comparison.parquet"
    cell = jc.compare(BUILTIN / "plan.parquet", runs, its, out).set_index("cell_id").loc[f"{LB}.full_iteration"]
    assert (cell.verdict, cell.paired_outcome) == (FAILED, vd.GRAPH_CRASHED)
    assert list(cell.crashed_run_ids) == [f"{LB}.full_iteration.r3"] == [cell.failure_run_id]
    assert cell.failure_class == "illegal_memory_access" and "illegal memory access" in cell.failure_detail
    t = load_tables(BUILTIN / "plan.parquet", runs, its, out)
    md = markdown_of(t)
    shape = next(x for x in md.splitlines() if x.startswith("- **") and "hidden=256" in x)
    assert "use full_iteration" not in shape, shape


def test_a_node_fault_is_infrastructure_and_excluded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same run ending in an uncorrectable ECC error (libcudart 13.0's text for cudaErrorECCUncorrectable): a node
    fault the retry policy retries in any arm (docs/failures.md): excluded from the timing, the cell stands."""
    ecc = str(crashed_log(tmp_path / "ecc.log", "uncorrectable ECC error encountered", "cudaErrorECCUncorrectable"))
    assert graphsweep(["compare", "--json", "--warmup", "3", "--eager", *logs("eager"), "--graph",
                       *logs("full_iteration")[:2], ecc]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == SPEEDUP and out["excluded_run_ids"] == [ecc] and not out["crashed_run_ids"]
    assert "excluded 1 run(s) from the timing" in out["reason"]
