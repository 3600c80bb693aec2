"""Every real log in tests/fixtures/logs parses to the outcome a Megatron engineer would name, with its proving line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from graphsweep import cli
from graphsweep.parse.run import ParsedRun, parse_run
from graphsweep.parse.filescan import FileScan
from graphsweep.parse.scan import scan_file
from graphsweep.parse.read import find_transient
from graphsweep.store.tables import ITERATION_COLUMNS
from tests.support import LOGS

RANK_FILES = [LOGS / "megatron-h200x2/b_rank_files" / f"rank{r}/{s}.log" for r in (0, 1) for s in ("stdout", "stderr")]


def run(rel: str, arm: str, warmup: int | None = 3, **kw) -> ParsedRun:
    return parse_run([LOGS / rel], arm=arm, warmup=warmup, run_id=rel, **kw)


def line_of(rel: str, n: int) -> str:
    return (LOGS / rel).read_bytes().split(b"\n")[n - 1].decode("utf-8", "replace")


# (file, arm, steady median ms from tests/fixtures/README.md (iterations 5-30), tolerance)
COMPLETED = [
    ("megatron-h200/eager.log", "eager", 63.4, 0.06),  # host-bound and noisy: the steady window may trim its start
    ("megatron-h200/te_attn.log", "graph", 39.9, 0.02),
    ("megatron-h200/local_full.log", "graph", 9.2, 0.02),
    ("megatron-h200x2/a_eager_dp2.log", "eager", 53.05, 0.02),
    ("megatron-h200x2/b_te_attn_dp2_tee.log", "graph", 31.70, 0.02),
    ("megatron-h200x2/c_local_full_tp2.log", "graph", 9.90, 0.02),
    ("h200-probe/medium-eager-1.log", "eager", 15.0, 0.06),
    ("h200-probe/medium-eager-2.log", "eager", 18.0, 0.06),
    ("h200-probe/medium-graph-1.log", "graph", 6.2, 0.02),
    ("h200-probe/medium-graph-2.log", "graph", 6.2, 0.02),
]


@pytest.mark.parametrize("rel,arm,median,tol", COMPLETED)
def test_completed_runs(rel: str, arm: str, median: float, tol: float) -> None:
    p = run(rel, arm)
    s = p.summary
    assert (s.outcome, s.error_class) == ("completed", None), s.reason
    assert s.n_iterations == 30 and s.last_iteration == 30 == s.train_iters
    assert p.iterations.iteration.tolist() == list(range(1, 31))
    assert s.steady_first is not None and s.steady_first >= 5 and s.steady_last == 30  # never warmup or capture
    assert s.step_ms_median == pytest.approx(median, rel=tol)
    assert s.step_ms_p10 <= s.step_ms_median <= s.step_ms_p90
    assert s.measurement_usable
    # the proving line is the end-of-training marker, at its real line number
    assert "[after training is done]" in s.signature
    assert "[after training is done]" in line_of(rel, s.signature_line)
    if arm == "graph":
        assert s.capture_seen and s.replay_seen and s.capture_iteration == 4


def test_te_capture_facts() -> None:
    s = run("megatron-h200/te_attn.log", "graph").summary
    assert s.graphable_layers == 8  # "Rank 0: 8 graphable layers."
    assert s.capture_s == pytest.approx(0.5830583572387695)
    # Bridge reports memory only after iterations 1 and 2 (before capture): the peak after capture is unknown
    assert s.peak_mem_gb is None and s.peak_mem_before_capture_gb == pytest.approx(3.6225)
    assert any("after capture unknown" in n for n in s.notes)


def test_probe_memory_after_capture() -> None:
    """probe.py prints a memory line after iteration warmup+2 = 5: the post-capture peak is known."""
    s = run("h200-probe/medium-graph-1.log", "graph").summary
    assert s.peak_mem_gb == pytest.approx(1.4571)
    assert s.peak_mem_before_capture_gb == pytest.approx(1.389)
    assert s.capture_s == pytest.approx(0.034)


def test_blocked_config_nan_check() -> None:
    s = run("megatron-h200/invalid_full.log", "graph").summary
    assert (s.outcome, s.error_class, s.phase) == ("blocked", "blocked_config", "setup")
    assert s.signature_line == 40
    assert line_of("megatron-h200/invalid_full.log", 40).startswith(
        "AssertionError: check_for_nan_in_loss must be disabled when using full_iteration CUDA graph.")
    assert "rerun_state_machine.check_for_nan_in_loss=False" in s.reason
    assert s.transient is None and find_transient(LOGS / "megatron-h200/invalid_full.log") is None


def test_megatron_oom_at_first_iteration() -> None:
    s = run("megatron-h200/oom.log", "eager").summary
    assert (s.outcome, s.error_class, s.phase, s.failed_iteration) == ("oom", "oom", "warmup", 1)
    assert s.oom_request == "11.00 GiB"
    assert s.signature_line == 370 and "Pretrain failed on rank=0 with OutOfMemoryError" in s.signature
    assert s.reason.startswith("CUDA OOM at warmup (iteration 1) allocating 11.00 GiB")
    assert find_transient(LOGS / "megatron-h200/oom.log") is None


@pytest.mark.parametrize("rel,arm", [("h200-probe/oom-eager-capped.log", "eager"),
                                     ("h200-probe/oom-graph-capped.log", "graph")])
def test_probe_oom_both_arms(rel: str, arm: str) -> None:
    s = run(rel, arm).summary
    assert (s.outcome, s.phase, s.failed_iteration, s.oom_request) == ("oom", "warmup", 1, "1024.00 MiB")
    assert s.signature_line == 28 and s.signature.startswith("torch.OutOfMemoryError: CUDA out of memory.")


def test_capture_error_is_blocked_capture_not_transient() -> None:
    """`loss.item()` inside capture: the capture iteration 4 fails; the CUDA_LAUNCH_BLOCKING hint that follows every
    CUDA error must not turn it into a retryable transient."""
    rel = "h200-probe/capture-error-sync.log"
    s = run(rel, "graph").summary
    assert (s.outcome, s.error_class, s.phase, s.failed_iteration) == ("blocked", "blocked_capture", "capture", 4)
    assert s.signature_line == 18
    assert line_of(rel, 18) == "torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing"
    assert not s.capture_seen  # capture began but never finished
    assert s.transient is None and find_transient(LOGS / rel) is None


def test_glued_iteration_line_keeps_its_row() -> None:
    """a_eager_dp2: iteration 30 ends glued to `Deleting CUDA graphs`."""
    df = run("megatron-h200x2/a_eager_dp2.log", "eager").iterations
    last = df[df.iteration == 30].iloc[0]
    assert last.elapsed_ms == pytest.approx(52.1) and last.grad_norm == pytest.approx(31.927)
    assert "Deleting CUDA graphs" in line_of("megatron-h200x2/a_eager_dp2.log", int(last.line))


def test_rank_files_merge_to_the_tee_log() -> None:
    """The four torchrun per-rank files of run b give the same rows and verdict as its `--tee` log."""
    merged = parse_run(RANK_FILES, arm="graph", warmup=3)
    tee = run("megatron-h200x2/b_te_attn_dp2_tee.log", "graph")
    cols = ["iteration", "elapsed_ms", "loss", "grad_norm", "mem_max_allocated_gb", "tflops"]
    pd.testing.assert_frame_equal(merged.iterations[cols], tee.iterations[cols])
    assert merged.summary.outcome == "completed" and merged.summary.capture_seen and merged.summary.replay_seen
    assert merged.summary.step_ms_median == tee.summary.step_ms_median
    # iteration rows come from rank 1 (last rank), memory from rank 0, Step Time TFLOP/s from rank 0
    assert set(merged.iterations.source_file) == {str(RANK_FILES[2])}
    assert merged.iterations.tflops.iloc[0] == pytest.approx(0.4)


def test_graph_arm_without_capture_is_invalid() -> None:
    s = run("megatron-h200/eager.log", "graph").summary
    assert (s.outcome, s.error_class) == ("invalid", "no_capture")
    assert not s.measurement_usable


def test_eager_arm_with_capture_is_invalid() -> None:
    s = run("megatron-h200/te_attn.log", "eager").summary
    assert (s.outcome, s.error_class) == ("invalid", "graph_in_eager")


def test_iterations_frame_schema_and_parquet(tmp_path: Path) -> None:
    df = run("megatron-h200/te_attn.log", "graph").iterations
    assert list(df.columns) == ITERATION_COLUMNS
    assert str(df.iteration.dtype) == "int64" and str(df.elapsed_ms.dtype) == "float64"
    assert df.run_id.unique().tolist() == ["megatron-h200/te_attn.log"]
    row4 = df[df.iteration == 4].iloc[0]  # the capture iteration includes the capture time
    assert row4.elapsed_ms == 2102.0
    assert df[df.iteration == 1].iloc[0].loss == pytest.approx(10.56106)
    assert df[df.iteration == 2].iloc[0].mem_max_allocated_gb == pytest.approx(3.6225)
    assert df.tflops.notna().all()  # from the rank-0 `Step Time` line
    df.to_parquet(tmp_path / "it.parquet", index=False)
    assert pd.read_parquet(tmp_path / "it.parquet").equals(df)


def test_summary_is_json_safe() -> None:
    d = run("megatron-h200/oom.log", "eager").summary.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False))["outcome"] == "oom"


def assert_same_scan(a: FileScan, b: FileScan) -> None:
    """The block reader and the line loop read one attempt the same way: its rows, hits and lifecycle."""
    for k in ("it", "it_line", "it_offset", "elapsed", "tflops", "loss", "grad_norm", "skipped", "step_tflops"):
        assert np.array_equal(np.asarray(getattr(a, k), dtype=float), np.asarray(getattr(b, k), dtype=float),
                              equal_nan=True), (a.path, k)
    assert [(h.sig.id, h.line, h.iteration_before) for h in a.hits] == \
           [(h.sig.id, h.line, h.iteration_before) for h in b.hits], a.path
    for k in ("capture_iteration", "capture_s", "memory", "n_lines", "n_bytes", "first_line", "train_iters",
              "iter_lines_unparsed", "elapsed_decimals", "nan_iteration", "loss_missing", "lm_loss_seen",
              "training_started", "start_iteration", "end_marker", "last_line", "ends_mid_line"):
        assert getattr(a, k) == getattr(b, k), (a.path, k)


def test_fast_and_line_loop_agree() -> None:
    """The vectorised path and the pure-Python line loop see the same rows and hits on every fixture."""
    for path in sorted(LOGS.rglob("*.log")):
        fast_scans, loop_scans = scan_file(path, fast=True), scan_file(path, fast=False)
        assert len(fast_scans) == len(loop_scans), path
        for a, b in zip(fast_scans, loop_scans):
            assert_same_scan(a, b)


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["parse", "--warmup", "3", "--json", str(LOGS / "megatron-h200/te_attn.log")]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("outcome", "error_class", "phase", "n_iterations", "steady_first", "steady_last", "step_ms_median",
                "peak_mem_gb", "capture_seen", "signature"):
        assert key in out
    assert out["outcome"] == "completed" and out["arm"] == "graph" and out["steady_first"] == 5


def test_cli_table_shows_proving_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A deep checkout path (CI's clone is one): piped output must keep `file:line` whole, not fold it.
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "invalid_full.log"
    deep.parent.mkdir(parents=True)
    deep.write_bytes((LOGS / "megatron-h200/invalid_full.log").read_bytes())
    assert cli.main(["parse", str(deep)]) == 0
    out = capsys.readouterr().out
    assert "blocked" in out and "check_for_nan_in_loss must be disabled" in out
    assert f"{deep}:40" in out


def test_cli_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["parse", "/nonexistent/log.txt"]) == 2
    assert "no such file" in capsys.readouterr().err  # one line on stderr (tests/commands/test_bad_input.py)
