"""The committed H200 example sweeps (results/examples/): their run folders, re-derived on this CPU by the real
workflow (Snakemake: plan, parse, aggregate, compare, report; nothing submitted), give the committed verdicts.

The run folders are what real NVIDIA H200 jobs wrote (docs/results-h200.md: how they ran, and the only edits); the
committed tables are what tools/rederive_examples.sh made of them. A change to the parser or the statistics that
moves a verdict fails here until the examples are re-derived and the docs that quote them are checked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from graphsweep import logformat as lf
from graphsweep import provenance
from graphsweep.entry import host_time
from graphsweep.parse.run import parse_run
from graphsweep.store.aggregate import aggregate
from graphsweep.store.tables import RUN_TIME_COLUMNS
from graphsweep.layout import RunDir
from graphsweep.fileio import UnusableFile
from tests.support import ROOT, copy_workflow, snakemake


EXAMPLES = ROOT / "results" / "examples"
SWEEPS = ("h200-builtin", "megatron-tiny-vanilla-gpt", "megatron-tiny-moe", "megatron-1b-dense", "megatron-moe-128e",
          "megatron-moe-128e-padded", "megatron-moe-128e-paired")
# ran with the eager arm's GPU-busy diagnostic
MEASURED_BUSY = ("h200-builtin", "megatron-1b-dense", "megatron-moe-128e", "megatron-moe-128e-padded",
                 "megatron-moe-128e-paired")
VERDICT_COLUMNS = ["cell_id", "verdict", "speedup", "ci_low", "ci_high", "n_eager", "n_graph", "loss_parity",
                   "mem_metric", "mem_delta_gb", "rule_id"]  # fmt: skip


def rederive(tmp: Path, sweep: str, runs: Path | None = None) -> Path:
    """tools/rederive_examples.sh, in a user's working directory: the run folders only, then the workflow."""
    workdir = copy_workflow(tmp)
    out = workdir / "results" / sweep
    shutil.copytree(runs or EXAMPLES / sweep / "runs", out / "runs",
                    ignore=shutil.ignore_patterns("iterations.parquet", "summary.json"))
    if (EXAMPLES / sweep / "extra_repeats.yaml").exists() and runs is None:  # `graphsweep more-repeats` raised its loop
        shutil.copy(EXAMPLES / sweep / "extra_repeats.yaml", out / "extra_repeats.yaml")
    for f in out.glob("runs/*/*"):
        f.touch()
    proc = snakemake(workdir, "--cores", "2", "--config", f"spec=configs/examples/{sweep}.yaml", "--rerun-triggers",
                     "mtime", "--allowed-rules", "plan", "parse", "aggregate", "compare", "report", "all")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out


@pytest.mark.slow
@pytest.mark.snakemake
@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_committed_verdicts_come_back_from_the_real_logs(tmp_path: Path, sweep: str) -> None:
    out = rederive(tmp_path, sweep)
    fresh = pd.read_parquet(out / "comparison.parquet")[VERDICT_COLUMNS].set_index("cell_id").sort_index()
    kept = pd.read_parquet(EXAMPLES / sweep / "comparison.parquet")[VERDICT_COLUMNS].set_index("cell_id").sort_index()
    pd.testing.assert_frame_equal(fresh, kept, check_exact=False, rtol=1e-9)
    runs = pd.read_parquet(out / "runs.parquet")
    parts = runs.set_index("run_id").sort_index()[RUN_TIME_COLUMNS]  # where each run's wall time went
    pd.testing.assert_frame_equal(parts, pd.read_parquet(EXAMPLES / sweep / "runs.parquet").set_index("run_id")
                                  .sort_index()[RUN_TIME_COLUMNS])  # fmt: skip
    assert set(runs.prov_gpu_name.dropna()) == {"NVIDIA H200"}  # every run says where it ran
    judged = pd.read_parquet(out / "comparison.parquet").query("verdict != 'blocked'")
    assert (judged.gpu_names == "NVIDIA H200").all()  # and so does every verdict
    assert (out / "report.html").stat().st_size > 10_000 and "Recommendations" in (out / "report.md").read_text()


def test_builtin_h200_sweep_says_what_the_gpu_did() -> None:
    cmp = pd.read_parquet(EXAMPLES / "h200-builtin" / "comparison.parquet").set_index("cell_id")
    launch = "h256-nh4-l4-s128-mb1-b444f4"
    full = cmp.loc[f"{launch}.full_iteration"]
    # launch-bound: the graph removes launches, decided at the loop's first look. What a user relies on is that it is
    # decided and large: its repeated interval at 3 repeats (wider than a fixed-design one: alpha is spent over the
    # loop's looks) still lies wholly above 2x, and the point estimate is above 5x (6.89x; the GPU idles 91% of a step)
    assert (full.verdict, full.loop_status) == ("speedup", "decided")
    assert full.ci_low > 2 and full.speedup > 5
    assert full.gpu_busy_share < 0.15  # and it says why: the GPU idles
    # compute-bound: the full-iteration graph is slower, its own interval wholly below 1 - margin, but at 3 repeats its
    # Benjamini-Hochberg q over the sweep's 9 timed cells does not pass the family check: inconclusive, not slowdown
    compute = cmp.loc["h4096-nh32-l4-s2048-mb4-cfca67.full_iteration"]
    assert compute.ci_high < 1 - compute.margin and compute.q_value > compute.alpha
    assert (compute.verdict, compute.family_gated) == ("inconclusive", True)
    capped = cmp[cmp.index.str.startswith("h1024-nh16-l8-s512-mb2-memfrac")]
    assert set(capped.verdict) == {"speedup", "oom"}  # scoped graphs do not fit under the cap; full_iteration does
    assert (cmp.loss_parity.dropna() == "ok").all()


def test_megatron_dense_example_memory_shows_the_te_graphs_cost() -> None:
    """Before: every arm's mem-max-allocated peak came at iteration 2 (3.58 GB) and Δ mem read +0.00 GB."""
    cmp = pd.read_parquet(EXAMPLES / "megatron-tiny-vanilla-gpt" / "comparison.parquet").set_index("variant")
    assert (cmp.mem_metric == "steady_mem_reserved_gb").all()
    assert (cmp.loc[["attn", "attn+mlp"], "mem_delta_gb"] > 0.04).all()
    runs = pd.read_parquet(EXAMPLES / "megatron-tiny-vanilla-gpt" / "runs.parquet")
    assert runs.capture_s.dropna().between(0.2, 0.5).all()  # TE's own capture time, not the capture iteration's
    assert runs.steady_mem_peak_gb.notna().all()  # the entry reset the peaks after capture in every arm


def test_megatron_dense_example_provenance_comes_from_the_training_process() -> None:
    """Before: these runs' versions came from the job wrapper's run.json; under Slurm the wrapper runs outside the
    container and would have recorded the controller's packages."""
    runs = pd.read_parquet(EXAMPLES / "megatron-tiny-vanilla-gpt" / "runs.parquet")
    assert len(runs) == 16
    for r in runs.itertuples():
        folder = EXAMPLES / "megatron-tiny-vanilla-gpt" / "runs" / r.run_id
        (line,) = parse_run([folder / "log.txt"]).summary.provenance_lines  # the entry's line, one rank
        assert line["versions"]["megatron_bridge"] == r.prov_bridge == "0.6.2"
        assert (line["versions"]["megatron_core"], line["versions"]["transformer_engine"]) == (r.prov_mcore, r.prov_te)
        assert line["versions"]["torch"] == r.prov_torch and line["gpu"]["name"] == r.prov_gpu_name == "NVIDIA H200"
        env = json.loads(r.prov_env)  # the compared environment is the training process's
        assert env == {k: v for k, v in line["env"].items() if k not in provenance.ENV_NOT_COMPARED}
        # TORCH_NCCL_AVOID_RECORD_STREAMS: graphsweep no longer sets it for torch 2.11 (the command each job ran, from
        # run.json), but Bridge 0.6.2's recipe does (COMMON_RECIPE_ENV_VARS, applied inside the training process),
        # so the line has it and the job wrapper's own record does not
        ran = json.loads((folder / "run.json").read_text())
        assert r.command == ran["command"] and "TORCH_NCCL_AVOID_RECORD_STREAMS" not in r.command
        assert env["TORCH_NCCL_AVOID_RECORD_STREAMS"] == "1"
        assert "TORCH_NCCL_AVOID_RECORD_STREAMS" not in ran["provenance"]["env"]


def records_only(tmp: Path, sweep: str) -> list[RunDir]:
    """The sweep's run folders with their records (run.json, summary.json, iterations.parquet) and no log at all."""
    runs = []
    for src in sorted((EXAMPLES / sweep / "runs").iterdir()):
        run = RunDir(tmp / "runs" / src.name)
        if (src / run.SUMMARY).exists():
            run.root.mkdir(parents=True)
            for name in (run.RUN, run.SUMMARY, run.ITERATIONS):
                shutil.copy(src / name, run.root / name)
            runs.append(run)
    return runs


def test_aggregate_reads_the_run_records_never_a_log(tmp_path: Path) -> None:
    """runs.parquet comes back whole from the runs' records alone: the versions the training process printed
    (prov_*) and where each run's wall time went (time_*) are the parser's, kept in summary.json."""
    sweep = "megatron-tiny-vanilla-gpt"  # its versions are the training process's, not the job wrapper's
    kept = pd.read_parquet(EXAMPLES / sweep / "runs.parquet")
    by_id = {run.run_id: run for run in records_only(tmp_path, sweep)}
    runs = [by_id[r] for r in kept.run_id]  # the order the workflow gives them in
    assert not any(run.log.exists() or run.ranks.exists() for run in runs)
    aggregate(EXAMPLES / sweep / "plan.parquet", runs, tmp_path / "runs.parquet", tmp_path / "iterations.parquet")
    assert kept.prov_torch.notna().all() and kept.time_startup_s.notna().all()  # from the training's lines
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "runs.parquet").drop(columns="log_path"),
                                  kept.drop(columns="log_path"))


def test_a_summary_parsed_before_it_kept_the_logs_facts_is_named(tmp_path: Path) -> None:
    """A summary.json written before the parser kept the provenance lines and stamps: aggregate says which file and
    what to do, instead of losing the training process's versions."""
    sweep = "megatron-tiny-vanilla-gpt"
    runs = records_only(tmp_path, sweep)
    old = json.loads(runs[0].summary.read_text())
    for key in ("provenance_lines", "first_iteration_stamp", "last_iteration_stamp"):
        old.pop(key)
    runs[0].summary.write_text(json.dumps(old))
    with pytest.raises(UnusableFile, match=r"summary\.json: lacks provenance_lines .*no job is submitted"):
        aggregate(EXAMPLES / sweep / "plan.parquet", runs, tmp_path / "runs.parquet", tmp_path / "iterations.parquet")
    assert not (tmp_path / "runs.parquet").exists()


def test_dropless_moe_full_iteration_is_blocked_by_preflight_and_its_real_failure_names_the_cause() -> None:
    cmp = pd.read_parquet(EXAMPLES / "megatron-tiny-moe" / "comparison.parquet").set_index("variant")
    full = cmp.loc["full_iteration"]
    assert full.verdict == "blocked" and full.rule_id == "full_iteration_dropless_moe" and full.gpu_seconds == 0
    assert "_maybe_dtoh_and_synchronize" in full.reason
    # the real failing runs (kept in runs/ as the rule's evidence): the same constraint id, the cause not the symptom
    for r in (1, 2):
        log = EXAMPLES / "megatron-tiny-moe" / "runs" / f"s1024-mb1-016c0b.full_iteration.r{r}" / "log.txt"
        s = parse_run([log], arm="graph", warmup=3).summary
        assert (s.outcome, s.signature_id) == ("blocked", "full_iteration_dropless_moe")
        assert "operation not permitted on an event last recorded in a capturing stream" in s.signature
        assert "token_dispatcher.py:950 in _maybe_dtoh_and_synchronize" in s.reason
    # nondeterministic MoE losses (eager repeats differ from iteration 3) do not trip the parity check
    assert (cmp.loc[["attn", "attn+router+pre", "router+pre"], "loss_parity"] == "ok").all()


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_results_doc_quotes_the_committed_intervals(sweep: str) -> None:
    """docs/results-h200.md quotes every timed cell's interval as the committed table has it (no stale figures)."""
    doc = (ROOT / "docs" / "results-h200.md").read_text()
    cmp = pd.read_parquet(EXAMPLES / sweep / "comparison.parquet").dropna(subset=["speedup"])
    assert len(cmp)
    for r in cmp.itertuples():
        quoted = f"{r.speedup:.2f}x [{r.ci_low:.2f}, {r.ci_high:.2f}]"
        assert quoted in doc, (r.cell_id, quoted)


@pytest.mark.slow
@pytest.mark.snakemake
def test_the_dense_specs_earlier_sweep_gives_what_the_docs_quote(tmp_path: Path) -> None:
    """benchmarks/data/h200-dense-sweep-a: the same spec on another H200, minutes earlier (docs/results-h200.md)."""
    out = rederive(tmp_path, "megatron-tiny-vanilla-gpt", ROOT / "benchmarks" / "data" / "h200-dense-sweep-a" / "runs")
    cmp = pd.read_parquet(out / "comparison.parquet").set_index("variant")
    assert dict(cmp.verdict) == {"attn": "speedup", "attn+mlp": "speedup", "full_iteration": "speedup"}
    doc = (ROOT / "docs" / "results-h200.md").read_text() + (ROOT / "benchmarks/data/h200-dense-sweep-a/README.md").read_text()
    for r in cmp.itertuples():
        assert f"{r.speedup:.2f}x [{r.ci_low:.2f}, {r.ci_high:.2f}]" in doc, r.Index
    assert (cmp.loss_parity == "ok").all()


@pytest.mark.parametrize("sweep", MEASURED_BUSY)
def test_every_eager_run_measured_its_gpu_and_no_graph_beat_the_ceiling(sweep: str) -> None:
    """The launch-boundness diagnostic on the real runs: every eager and A/A run printed its GPU-busy line, and every
    graph cell's median speedup sits at or below its shape's ceiling (eager step / GPU busy)."""
    runs = pd.read_parquet(EXAMPLES / sweep / "runs.parquet")
    eager = runs[runs.variant.isin(["eager", "aa"])]
    assert eager.gpu_busy_ms.notna().all() and (eager.gpu_busy_share.between(0, 1)).all()
    assert runs[~runs.variant.isin(["eager", "aa"])].gpu_busy_ms.isna().all()  # graph arms are not profiled
    cmp = pd.read_parquet(EXAMPLES / sweep / "comparison.parquet").dropna(subset=["speedup"])
    graph = cmp[cmp.variant != "aa"]
    assert len(graph) and (graph.speedup <= graph.graph_ceiling).all()
    for busy in runs.groupby("shape_id").gpu_busy_ms:  # the GPU's work per step is stable across jobs
        b = busy[1].dropna()
        assert b.max() / b.min() < 1.03


def test_production_sized_example_says_how_launch_bound_it_is() -> None:
    cmp = pd.read_parquet(EXAMPLES / "megatron-1b-dense" / "comparison.parquet").set_index("cell_id")
    short, long = cmp.loc["s512-ca7740.full_iteration"], cmp.loc["s4096-3eeebf.full_iteration"]
    assert short.verdict == long.verdict == "speedup"
    assert short.gpu_busy_share < 0.25 < long.gpu_busy_share < 0.7  # host-bound at both lengths, less so at 4096
    assert short.graph_ceiling > long.graph_ceiling > 1.5
    assert (cmp[cmp.variant == "aa"].verdict.isin(["neutral", "inconclusive"])).all()  # the A/A cells
    report = (EXAMPLES / "megatron-1b-dense" / "report.md").read_text()
    # the ceiling is the pooled eager-like step (eager and A/A runs) over the GPU-busy time: 236.1 / 42.3 ms
    assert "the GPU is busy 18% of an eager step (42.3 of 236.1 ms): a graph can win up to 5.58x" in report
    # seq 4096's eager runs part: the band next to the recommendation widens from the floor to tens of percent
    assert "its lm loss follows eager's within the band ±0.69% at iterations 1-5" in report
    assert "where this shape's eager runs part (up to ±70% of each other), the loss checks little" in report


@pytest.mark.slow
@pytest.mark.snakemake
def test_the_builtin_specs_earlier_sweep_gives_what_the_docs_quote(tmp_path: Path) -> None:
    """benchmarks/data/h200-builtin-sweep-a: the same spec on another H200 at 69d3e3c (docs/results-h200.md)."""
    out = rederive(tmp_path, "h200-builtin", ROOT / "benchmarks" / "data" / "h200-builtin-sweep-a" / "runs")
    cmp = pd.read_parquet(out / "comparison.parquet").dropna(subset=["speedup"]).set_index("cell_id")
    doc = (ROOT / "docs" / "results-h200.md").read_text()
    for cell in ("h256-nh4-l4-s128-mb1-b444f4.full_iteration", "h256-nh4-l4-s128-mb1-b444f4.attn+mlp",
                 "h4096-nh32-l4-s2048-mb4-cfca67.full_iteration", "h1024-nh16-l8-s512-mb2-memfrac0.0113-6c9bec.full_iteration"):
        r = cmp.loc[cell]
        assert f"{r.speedup:.2f}x [{r.ci_low:.2f}, {r.ci_high:.2f}]" in doc, cell
    assert (cmp.loss_parity == "ok").all()


def _host_shares(log: Path, steady_ms: float) -> tuple[dict[str, float], float]:
    raw = log.read_bytes()
    m, busy = lf.RE_HOST_TIME.search(raw), lf.RE_GPU_BUSY.search(raw)
    regions = {k.decode(): (float(ms), float(w) if w else None, float(e) if e else None)
               for k, ms, w, e in lf.RE_HOST_REGION.findall(m.group(5))}
    return host_time.steady_shares(regions, float(m.group(4)), steady_ms), float(busy.group(4))


def test_realistic_moe_says_where_the_host_time_goes_and_the_estimate_meets_the_measured_graphs() -> None:
    """docs/results-h200.md section 6: the experts hold most of the eager step's host time, no scope a dropless MoE
    allows takes them, and the estimate from the regions a scope covers lies inside every measured interval. The
    section's figures are the 2026-12-02 sweep's (kept in benchmarks/data/h200-moe-128e-sweep-a as it was derived)."""
    sweep = ROOT / "benchmarks" / "data" / "h200-moe-128e-sweep-a"
    cmp = pd.read_parquet(sweep / "comparison.parquet").set_index("variant")
    runs = pd.read_parquet(sweep / "runs.parquet").set_index("run_id")
    scopes = {"attn": ["attn"], "attn+router+pre": ["attn", "moe_router", "moe_preprocess"],
              "router+pre": ["moe_router", "moe_preprocess"]}
    for r in (1, 2, 3):
        run_id = f"s4096-f2da0d.eager.r{r}"
        shares, busy = _host_shares(sweep / "runs" / run_id / "log.txt", runs.loc[run_id, "step_ms_median"])
        assert shares["experts"] > 0.5 and shares["optimizer"] + shares["outside"] > 0.25
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-4)
        eager_ms = cmp.loc["attn", "eager_step_ms"]
        for variant, names in scopes.items():
            estimate = eager_ms / host_time.scope_estimate(eager_ms, busy, shares, names)
            row = cmp.loc[variant]
            assert row.ci_low <= estimate <= row.speedup, (variant, estimate)  # inside, below the point
    assert (cmp.loc[list(scopes), "loss_parity"] == "ok").all() and cmp.loc["full_iteration", "verdict"] == "blocked"
    # the lone run with waits and events: the host barely waits on the GPU; the experts are launch and Python work
    lone = (ROOT / "benchmarks/data/h200-moe-host-time/eager-dropless.log").read_bytes()
    waits = [float(w) for _, _, w, _ in lf.RE_HOST_REGION.findall(lf.RE_HOST_TIME.search(lone).group(5))]
    assert len(waits) == len(host_time.REGIONS) and sum(waits) < 2.0


def test_drop_and_pad_full_iteration_reaches_the_ceiling() -> None:
    cmp = pd.read_parquet(EXAMPLES / "megatron-moe-128e-padded" / "comparison.parquet").set_index("variant")
    full = cmp.loc["full_iteration"]
    assert full.speedup >= 0.95 * full.graph_ceiling and full.n_eager == full.n_graph == 1
    # its eager line gave events: the shares are of the steady step, and the estimate is the GPU's own time
    assert full.host_shares_of == "steady step" and full.host_estimate_speedup == pytest.approx(full.graph_ceiling)


def test_paired_moe_eager_noise_is_the_processs_own_and_seven_pairs_decide_the_cell() -> None:
    """docs/results-h200.md section 6, the paired sweep: each pair job's four training processes, parsed from its log
    (its segments), show the eager arm's two processes inside one job as far apart as any two of its processes,
    and the graph arm's closer together: pairing cancels what differs between jobs, not what differs between
    processes, so 6 pairs left the cell undecided; the loop, continued by `graphsweep more-repeats` on another H200
    and another graphsweep commit with the same measuring harness, decided it at its seventh pair."""
    folder = EXAMPLES / "megatron-moe-128e-paired"
    it = pd.read_parquet(folder / "iterations.parquet")
    runs = pd.read_parquet(folder / "runs.parquet").set_index("run_id")
    assert set(it.segment) == {"A1", "A2", "B1", "B2"} and (runs.outcome == "completed").all() and len(runs) == 14
    med = it[it.steady].groupby(["run_id", "segment"]).elapsed_ms.median()

    def spread(arm: str, jobs: tuple[str, ...]) -> tuple[float, float]:
        first, second = {"eager": ("A1", "A2"), "graph": ("B1", "B2")}[arm]
        ids = runs.index[(runs.arm == arm) & runs.pair_id.str.endswith(jobs)]
        apart = np.log(med.loc[ids].xs(first, level="segment") / med.loc[ids].xs(second, level="segment").values)
        return apart.std(ddof=1) / np.sqrt(2), np.log(med.loc[ids]).std(ddof=1)

    every = tuple(f".r{k}" for k in range(1, 8))
    first_gpu = every[:6]  # the first session's six jobs, one H200
    assert spread("eager", every)[0] > 0.8 * spread("eager", every)[1]  # within a job as wide as across
    assert spread("graph", every)[0] < 0.5 * spread("eager", every)[0]  # the graph's processes agree more closely
    assert spread("graph", first_gpu)[0] < 0.5 * spread("graph", first_gpu)[1]  # on one GPU: between jobs
    cell = pd.read_parquet(folder / "comparison.parquet").iloc[0]
    assert cell.verdict == "speedup" and cell.ci_low > 1.02 and cell.n_eager == cell.n_graph == 7
    assert cell.loss_parity == "ok"
    assert cell.not_comparable_fields is None or not len(cell.not_comparable_fields)
    # the seventh job ran at another graphsweep commit: compared by the harness digest both commits share
    assert runs.prov_graphsweep_sha.nunique() == 2 and runs.prov_graphsweep_harness.nunique() == 1
    look5 = json.loads((folder / "looks" / "look-5.json").read_text())
    assert look5["end"] == "decided" and look5["next_runs"] == [] and look5["repeats"] == 7
    pair_s = runs.groupby("pair_id").gpu_seconds.sum()  # a pair job's two arms' rows split its GPU-seconds
    look1 = json.loads((folder / "looks" / "look-1.json").read_text())
    assert look1["next_gpu_hours"] == pytest.approx(pair_s[pair_s.index.str.endswith(("r1", "r2", "r3"))].median() / 3600)
