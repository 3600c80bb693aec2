"""Where the GPU-hours go (issue 25 item 4): each run's wall time in parts (graphsweep/store/timeparts.py, the
runs.parquet time_*/gpu_* columns) and the report's breakdown per sweep.

On the committed real H200 runs (results/examples/*/runs: run.json as the jobs wrote it, the logs they printed):
the parts add up to the job's wall time, the split at the first iteration's stamp agrees with the last one's
within the stamps' precision, and the steady window's part is its iteration rows. On real CPU runs through the
workflow: a run that stops before iteration 1 is all start-up, a pair job's arms are not split, ingested logs have
no job wall time.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from graphsweep import logformat as lf
from graphsweep.parse.files import read_line
from graphsweep.report import gpu_time
from graphsweep.store import timeparts as tp
from graphsweep.store.tables import RUN_TIME_COLUMNS
from tests.support import BY_HAND, ROOT, run_spec

EXAMPLES = ROOT / "results" / "examples"
SWEEPS = ("h200-builtin", "megatron-tiny-vanilla-gpt", "megatron-tiny-moe", "megatron-1b-dense")
PARTS = ("startup", "warmup", "steady", "after", "untimed", "teardown")


def committed(sweep: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(EXAMPLES / sweep / "runs.parquet"), pd.read_parquet(EXAMPLES / sweep / "iterations.parquet")


def stamp_of(row: pd.Series, run_dir: Path) -> dt.datetime:
    """The time stamp on an iteration row's line, read from the committed log by hand (the regex below, not the
    parser's pattern): what the parser's summary.json stamps must agree with."""
    parts = Path(row.source_file).parts
    path = run_dir.joinpath(*parts[parts.index(run_dir.name) + 1:])  # the row names its file as the parser was given it
    line = path.read_text(errors="replace").splitlines()[int(row.line) - 1]
    m = re.search(rf"\[([\d-]+ [\d:.]+)\] iteration\s+{int(row.iteration)}/", line)
    assert m, (path, row.line)
    return dt.datetime.fromisoformat(m[1])


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_parts_add_up_to_the_job_wall_time_and_agree_with_the_last_stamp(sweep: str) -> None:
    runs, iterations = committed(sweep)
    assert len(runs) and set(runs.time_split) == {tp.SPLIT_STAMPS}  # every real run split at its stamps
    for r in runs.itertuples():
        parts = [getattr(r, f"time_{p}_s") for p in PARTS]
        assert sum(parts) == pytest.approx(r.wall_s, abs=0.01), r.run_id  # wall_s: ms; each part rounded to ms
        assert min(parts) >= 0 and r.time_outside_s == pytest.approx(r.wall_s - r.time_warmup_s - r.time_steady_s
                                                                     - r.time_after_s, abs=0.01)  # fmt: skip
        # the teardown is the remainder after the first stamp's start-up; the last iteration's stamp against the
        # job's end_utc measures it on its own: the two agree within both stamps' truncation (1 s each)
        rows = iterations[iterations.run_id == r.run_id].sort_values("iteration")
        end = r.end_utc.to_pydatetime().replace(tzinfo=None)  # a UTC timestamp; the H200 host kept UTC: zone 0
        from_last = (end - stamp_of(rows.iloc[-1], EXAMPLES / sweep / "runs" / r.run_id)).total_seconds()
        assert abs(r.time_teardown_s - from_last) <= 2 * tp.STAMP_S, (r.run_id, r.time_teardown_s, from_last)
        assert r.gpu_seconds == pytest.approx(r.gpus * r.wall_s, abs=0.01)
        for p in (*PARTS, "outside"):
            assert getattr(r, f"gpu_{p}_s") == pytest.approx(r.gpus * getattr(r, f"time_{p}_s"), abs=0.01)


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_parser_keeps_the_first_and_last_iteration_stamps(sweep: str) -> None:
    """summary.json holds the stamps on the run's first and last iteration lines, as the log printed them: what the
    split above reads (timeparts reads records, never a log)."""
    _, iterations = committed(sweep)
    for run_dir in sorted((EXAMPLES / sweep / "runs").iterdir()):
        rows = iterations[iterations.run_id == run_dir.name].sort_values("iteration")
        if not (run_dir / "summary.json").exists() or not len(rows):
            continue
        summary = json.loads((run_dir / "summary.json").read_text())
        assert (dt.datetime.fromisoformat(summary["first_iteration_stamp"]),
                dt.datetime.fromisoformat(summary["last_iteration_stamp"])) == \
            (stamp_of(rows.iloc[0], run_dir), stamp_of(rows.iloc[-1], run_dir)), run_dir.name


def test_one_line_is_read_by_its_number_across_blocks() -> None:
    """parse/files.py read_line, the stamps' reader: every line of a real log, with blocks cut mid-line."""
    log = EXAMPLES / "megatron-1b-dense" / "runs" / "s512-ca7740.eager.r1" / "log.txt"
    lines = log.read_bytes().splitlines(keepends=True)
    for size in (7, 4096, 1 << 24):
        assert [read_line(log, k, size) for k in range(1, len(lines) + 2)] == lines + [b""]


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_steady_part_is_the_steady_windows_iteration_rows(sweep: str) -> None:
    runs, iterations = committed(sweep)
    for r in runs.itertuples():
        rows = iterations[iterations.run_id == r.run_id]
        if pd.isna(r.steady_first):  # no window (an OOM run of the builtin sweep): every iteration is warmup
            assert r.time_steady_s == 0 and r.time_warmup_s == pytest.approx(rows.elapsed_ms.sum() / 1e3, abs=1e-3)
            continue
        inside = rows[rows.iteration.between(r.steady_first, r.steady_last)]
        assert len(inside) == r.steady_n
        assert r.time_steady_s == pytest.approx(inside.elapsed_ms.sum() / 1e3, abs=1e-3), r.run_id
        before = rows[rows.iteration < r.steady_first]
        assert r.time_warmup_s == pytest.approx(before.elapsed_ms.sum() / 1e3, abs=1e-3)
        assert r.time_steady_s == pytest.approx(r.step_ms_mean * r.steady_n / 1e3, abs=1e-3)  # columns: ms
    # the report's share that measured something: the usable runs' steady windows over the sweep's GPU-seconds
    g = gpu_time.gpu_time(runs)
    usable = runs[runs.measurement_usable.astype(bool)]
    assert g.measured_h * 3600 == pytest.approx(usable.gpu_steady_s.sum(), abs=1e-6)
    assert g.total_h * 3600 == pytest.approx(runs.gpu_seconds.sum(), abs=1e-6)
    assert sum(h for _, h, _ in g.parts) == pytest.approx(g.total_h, abs=1e-5)


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_committed_columns_are_what_the_run_folders_give(sweep: str) -> None:
    """runs.parquet's time columns come back from each run folder alone (no stale example tables)."""
    runs, _ = committed(sweep)
    for r in runs.itertuples():
        (parts,) = tp.folder_parts(EXAMPLES / sweep / "runs" / r.run_id).values()
        fresh = parts.columns(r.gpus)
        assert list(fresh) == RUN_TIME_COLUMNS
        assert fresh == {c: getattr(r, c) for c in RUN_TIME_COLUMNS}, r.run_id


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_reports_and_the_results_doc_quote_the_breakdown(sweep: str) -> None:
    runs, _ = committed(sweep)
    g = gpu_time.gpu_time(runs)
    share = f"{g.measured_h / g.total_h:.1%} of the sweep's {g.total_h:.3f} GPU-hours measured something"
    assert share in (EXAMPLES / sweep / "report.md").read_text()
    page = (EXAMPLES / sweep / "report.html").read_text()
    assert "id='gpu-time'" in page and share in html.unescape(page)  # the page's text (its ' written &#39;)
    doc = (ROOT / "docs" / "results-h200.md").read_text()
    row = re.search(rf"^\| `{re.escape(sweep)}` \|.*$", doc, re.M)
    assert row, f"docs/results-h200.md has no row for {sweep}"
    for what, h, _ in g.parts:
        assert f"{h / g.total_h:.1%}" in row[0], (sweep, what)
    assert f"**{g.measured_h / g.total_h:.1%}**" in row[0] and f"{g.total_h:.3f}" in row[0]


def test_a_process_in_another_time_zone_gets_the_same_split() -> None:
    """The stamps are the training process's local time (datetime.now()): a real run's stamps as a process on
    UTC-08:00 (or +05:45) prints them give the same split; an offset that is no time zone gives none."""
    runs, iterations = committed("megatron-1b-dense")
    r = runs.iloc[0]
    rows = iterations[iterations.run_id == r.run_id].sort_values("iteration")
    run_dir = EXAMPLES / "megatron-1b-dense" / "runs" / r.run_id
    first, last = stamp_of(rows.iloc[0], run_dir), stamp_of(rows.iloc[-1], run_dir)
    loop_start = first - dt.timedelta(seconds=rows.elapsed_ms.iloc[0] / 1e3)
    start, end = (x.to_pydatetime().replace(tzinfo=None) for x in (r.start_utc, r.end_utc))  # UTC timestamps
    base = tp.split_outside(r.time_outside_s, start, end, loop_start, last)
    assert base[0] == pytest.approx(r.time_startup_s, abs=1e-3) and base[3] == tp.SPLIT_STAMPS
    for shift in (dt.timedelta(hours=-8), dt.timedelta(hours=5, minutes=45)):
        *secs, how = tp.split_outside(r.time_outside_s, start, end, loop_start + shift, last + shift)
        assert secs == pytest.approx(list(base[:3]), abs=1e-6) and how == base[3]
    odd = dt.timedelta(minutes=7)
    assert tp.split_outside(r.time_outside_s, start, end, loop_start + odd, last + odd)[0] is None


def test_a_log_printed_every_k_iterations_counts_every_iteration() -> None:
    """Megatron with log_interval=k prints every k-th iteration with the mean elapsed time of the k (Bridge
    train_utils.py L1104-1105): a real run's rows, thinned that way (derived from the real log, not a log that ran
    so), give the same loop time."""
    _, iterations = committed("megatron-1b-dense")
    rows = iterations[iterations.run_id == iterations.run_id.iloc[0]].sort_values("iteration")
    k = 5
    blocks = rows.groupby((rows.iteration - 1) // k)
    thinned = blocks.agg(iteration=("iteration", "max"), elapsed_ms=("elapsed_ms", "mean"))
    assert list(thinned.iteration) == [5, 10, 15, 20, 25]
    assert tp.iteration_seconds(thinned).sum() == pytest.approx(rows.elapsed_ms.sum() / 1e3, rel=1e-9)
    resumed = thinned.assign(iteration=thinned.iteration + 1000)  # a run resumed at iteration 1000
    assert tp.iteration_seconds(resumed).sum() == pytest.approx(rows.elapsed_ms.sum() / 1e3, rel=1e-9)


def test_the_stamp_pattern_reads_bridge_and_megatron_core_lines() -> None:
    """Bridge 0.6.2 train_utils.py L1173 prints whole seconds, MCore 0.19.2 training.py L2844 adds `.%f`."""
    now = dt.datetime(2026, 12, 1, 20, 21, 53, 123456)
    bridge = f" [{now.strftime('%Y-%m-%d %H:%M:%S')}] iteration        1/      25 | consumed samples: 2 |"
    core = f" [{now.strftime('%Y-%m-%d %H:%M:%S.%f')}] iteration        7/      25 |"
    assert lf.ITER_STAMP.search(bridge.encode()).group(1, 2) == (b"2026-12-01 20:21:53", b"1")
    assert lf.ITER_STAMP.search(core.encode()).group(1, 2) == (b"2026-12-01 20:21:53.123456", b"7")
    assert lf.ITER_STAMP.search(lf.iteration_line(3, 9, micro_batch=1, elapsed_ms=1.0, tflops=1.0, lr=1e-4, loss=1.0,
                                                  grad_norm=1.0).encode())  # the builtin's own lines  # fmt: skip


# ---- real CPU runs through the workflow (Snakemake + submitit, local executor) ------------------------------------
TINY = {
    "sweep": "gpuhours",
    "workload": {"kind": "builtin"},
    "axes": {"hidden": [32]},
    "fixed": {"layers": 1, "heads": 2, "seq_length": 16, "micro_batch": 1, "vocab": 64},
    "variants": [{"impl": "full_iteration"}],  # on the CPU: blocked by the missing CUDA device before iteration 1
    "verify": True,  # submitted although the plan blocks it (no CUDA here): the run that stops before iteration 1
    "repeats": 1,
    "warmup": 1,
    "iterations": 8,
    "executor": {"cluster": "local", "timeout_min": 5},
}


@pytest.mark.slow
def test_cpu_runs_a_run_stopped_before_iteration_1_is_all_start_up(tmp_path: Path) -> None:
    out = run_spec(tmp_path, "gpuhours", TINY) / "results" / "gpuhours"
    runs = pd.read_parquet(out / "runs.parquet").set_index("arm")
    graph, eager = runs.loc["graph"], runs.loc["eager"]
    assert graph.outcome == "blocked" and graph.n_iterations == 0
    assert graph.time_split == tp.SPLIT_NO_ITERATION and graph.time_startup_s == pytest.approx(graph.wall_s, abs=1e-3)
    assert graph[[f"time_{p}_s" for p in PARTS[1:]]].tolist() == [0.0] * 5
    assert eager.time_split == tp.SPLIT_STAMPS and eager.time_steady_s > 0
    assert sum(eager[f"time_{p}_s"] for p in PARTS) == pytest.approx(eager.wall_s, abs=0.01)
    report = (out / "report.md").read_text()
    assert "**Where the GPU-hours went**" in report and "| start-up: job start to the first iteration |" in report
    assert "of its 2 runs." in report


@pytest.mark.slow
def test_cpu_pair_job_arms_keep_start_up_and_teardown_together(tmp_path: Path) -> None:
    out = run_spec(tmp_path, "gpuhours", {**TINY, "pairing": True}) / "results" / "gpuhours"
    runs = pd.read_parquet(out / "runs.parquet").set_index("arm")
    eager, graph = runs.loc["eager"], runs.loc["graph"]
    assert eager.pair_id == graph.pair_id and eager.time_split == tp.SPLIT_PAIR
    assert pd.isna(eager.time_startup_s) and pd.isna(eager.time_teardown_s) and eager.time_steady_s > 0
    loop = eager.time_warmup_s + eager.time_steady_s + eager.time_after_s
    assert eager.time_outside_s == pytest.approx(eager.wall_s - loop, abs=0.01)  # the arm's share of the job
    assert graph.time_split == tp.SPLIT_NO_ITERATION and graph.time_startup_s == pytest.approx(graph.wall_s, abs=1e-3)
    info = json.loads((out / "runs" / eager.pair_id / "run.json").read_text())
    assert eager.gpu_seconds + graph.gpu_seconds == pytest.approx(info["gpu_seconds"], abs=0.01)
    assert "start-up and teardown, not split (1 runs" in (out / "report.md").read_text()


@pytest.mark.slow
def test_ingested_logs_have_no_job_wall_time(tmp_path: Path) -> None:

    out = run_spec(tmp_path, "by-hand", BY_HAND) / "results" / BY_HAND["sweep"]
    runs = pd.read_parquet(out / "runs.parquet")
    assert set(runs.executor) == {"ingest"} and runs.wall_s.isna().all()
    assert runs.time_split.str.startswith("no job wall time (executor ingest)").all()
    assert runs[["time_startup_s", "time_teardown_s", "time_outside_s"]].isna().all().all()
    done = runs[runs.outcome == "completed"]
    assert len(done) and (done.time_steady_s > 0).all()
    report = (out / "report.md").read_text()
    assert f"{len(runs)} runs have no job wall time (ingested logs)" in report
