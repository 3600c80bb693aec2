"""What several test modules share, in one place: the repository's folders, a scratch copy of the workflow and the
real Snakemake CLI on it, constructed report tables, headless Chromium, the benchmarks' pool of real jobs.

Test modules import helpers from here, never from one another (tests/house/test_architecture.py checks it); conftest.py
holds only pytest's hooks and fixtures.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest
import yaml

from graphsweep.judge import prose
from graphsweep.parse.run import parse_run
from graphsweep.parse.work import given_config
from graphsweep.store.tables import COMPARISON_COLUMNS, PLAN_COLUMNS, SUMMARY_NOT_COLUMNS, read_table, write_table
from graphsweep.vocab import EAGER, GRAPH

ROOT = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = ROOT / "tests" / "fixtures"


# --------------------------------------------------------------------------------------------------
# The workflow, run for real
def copy_workflow(dest: Path) -> Path:
    """A working directory with the workflow's configs, as a user's clone would have them."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "configs", dest / "configs", dirs_exist_ok=True)
    return dest


def snakemake(workdir: Path, *args: str, timeout: float = 900, python: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run the real Snakemake CLI on the repository's Snakefile in workdir (with `python`: another interpreter)."""
    cmd = [str(python or sys.executable), "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory",
           str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def run_spec(dest: Path, name: str, spec: dict) -> Path:
    """A working directory where the sweep spec `spec` (written as configs/NAME.yaml) ran to the end with Snakemake."""
    workdir = copy_workflow(dest)
    (workdir / "configs" / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = snakemake(workdir, "--cores", "2", "--config", f"spec=configs/{name}.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return workdir


# One tiny builtin shape, a CPU-blocked graph variant and an A/A cell, its decision loop's budget its first look (so
# nothing is added on this CPU machine): tests/plan/test_one_plan.py, also run as pair jobs
# (tests/workflow/test_pairing_workflow.py).
ADAPTIVE_SPEC = {
    "sweep": "adaptive",
    "workload": {"kind": "builtin"},
    "axes": {"hidden": [32]},
    "fixed": {"layers": 1, "heads": 2, "seq_length": 16, "micro_batch": 1, "vocab": 64},
    "variants": [{"impl": "full_iteration"}],  # blocked at plan time on the CPU: never inconclusive, never repeated
    "aa_control": True,
    "repeats": 2,
    "warmup": 1,
    "iterations": 8,
    "margin": 0.000001,  # so small that no interval fits inside: the A/A cell cannot be neutral
    "decide": {"max_repeats": 2},
    "executor": {"cluster": "local", "timeout_min": 5},
}


def planned_runs(text: str) -> set[str]:
    """run_ids of the `run` jobs a `snakemake -n` would execute."""
    ids = set()
    for block in re.split(r"\n\s*\n", text):
        if re.search(r"^(local)?rule run:", block, re.M):
            ids.update(re.findall(r"run_id=([^\s,]+)", block))
    return ids


# --------------------------------------------------------------------------------------------------
# Constructed report tables (named so: the verdict fields are typed, the sentences come from judge/prose.py)
SWEEP = "h200-tiny-llama"
WARMUP = 3  # cuda_graph_warmup_steps: capture happens on iteration 4 (fixtures/megatron-h200/te_attn.log)
ITERS = 30
NAN_RULE = (
    # Bridge training/config.py L1364-1369 (ConfigContainer.validate), docs/megatron-facts.md §3.2
    "check_for_nan_in_loss must be disabled when using full_iteration CUDA graph. "
    "Set rerun_state_machine.check_for_nan_in_loss=False."
)
# A CUDA OOM run's reason as the parser writes it, for a real Bridge log that ran out of memory on an H200
OOM_TEXT = parse_run([SHARED_FIXTURES / "logs" / "megatron-h200" / "oom.log"], arm="eager", warmup=WARMUP).summary.reason


def _series(rng: np.random.Generator, steady_ms: float, capture: bool, noise: float = 0.01) -> list[float]:
    """Iteration times as Megatron prints them: a slow first iteration, warmup, the capture spike, then steady."""
    out = []
    for i in range(1, ITERS + 1):
        if i == 1:
            out.append(steady_ms * 40 + 900.0)  # setup, compilation, allocator growth
        elif i <= WARMUP:
            out.append(steady_ms * 1.6)
        elif i == WARMUP + 1 and capture:
            out.append(steady_ms * 25 + 300.0)  # the capture iteration
        else:
            out.append(steady_ms * (1 + rng.normal(0, noise)))
    return out


class Sweep:
    """Builds the four tables of a small sweep with known outcomes."""

    def __init__(self) -> None:
        self.plan: list[dict] = []
        self.runs: list[dict] = []
        self.iters: list[dict] = []
        self.comparison: list[dict] = []
        self.rng = np.random.default_rng(7)

    def _plan_row(self, shape: dict, sid: str, cell: str, arm: str, variant: str, impl: str, scope: str, k: int, blocked: str | None) -> dict:
        rid = f"{cell}.r{k}"
        row = dict(
            sweep=SWEEP, run_id=rid, shape_id=sid, cell_id=cell, arm=arm, variant=variant, impl=impl, scope=scope,
            repeat=k, warmup=WARMUP, iterations=ITERS - WARMUP - 1, gpus=1, workload="megatron_bridge",
            status="blocked" if blocked else "submit", rule_id="full_iteration_nan_check" if blocked else None,
            rule_message=blocked, rule_source="Bridge training/config.py L1364-1369" if blocked else None,
            command="python mb_run.py ...", seed=1234, est_gpu_seconds=0.0 if blocked else 95.0,
            graph_overrides=None, look=1, **shape,
        )  # fmt: skip
        self.plan.append(row)
        return row

    def _run(self, prow: dict, outcome: str, steady_ms: float | None, peak: float | None, reason: str = "", noise: float = 0.01) -> None:
        rid = prow["run_id"]
        graph = prow["arm"] == "graph"
        row = dict(prow)
        row.update(
            outcome=outcome, error_class="oom" if outcome == "oom" else None, reason=reason,
            gpu_seconds=float(self.rng.uniform(80, 110)), wall_s=100.0, capture_seen=graph and outcome == "completed",
            replay_seen=graph and outcome == "completed", peak_mem_gb=peak, log_path=f"results/{SWEEP}/runs/{rid}/log.txt",
            steady_first=None, steady_last=None, steady_n=0,
        )  # fmt: skip
        if steady_ms is not None:
            times = _series(self.rng, steady_ms, capture=graph, noise=noise)
            first = WARMUP + 2
            row.update(steady_first=first, steady_last=ITERS, steady_n=ITERS - first + 1, step_ms_median=steady_ms)
            for i, ms in enumerate(times, 1):
                self.iters.append(dict(run_id=rid, iteration=i, elapsed_ms=ms, tflops=None, loss=10.0 - i * 0.05, grad_norm=2.0,
                                       mem_allocated_gb=peak, mem_max_allocated_gb=peak, mem_max_reserved_gb=peak,
                                       source_file="log.txt"))  # fmt: skip
        elif outcome == "oom":  # died in capture: the iterations before it were logged
            row.update(phase="capture", failed_iteration=WARMUP + 1, capture_iteration=WARMUP + 1 if graph else None)
            for i, ms in enumerate(_series(self.rng, 50.0, capture=False)[:WARMUP], 1):
                self.iters.append(dict(run_id=rid, iteration=i, elapsed_ms=ms, source_file="log.txt"))
        self.runs.append(row)

    def shape(self, shape: dict, eager: list[tuple[str, float | None, float | None, str]], reps: int = 3) -> tuple[str, list[str]]:
        sid = "h{hidden}-mb{micro_batch}-".format(**shape) + "3f9a"
        ids = []
        for k, (outcome, ms, peak, reason) in enumerate(eager[:reps], 1):
            prow = self._plan_row(shape, sid, f"{sid}.eager", "eager", "eager", "none", "", k, None)
            self._run(prow, outcome, ms, peak, reason, noise=0.04)
            ids.append(prow["run_id"])
        return sid, ids

    def cell(self, shape: dict, sid: str, eager_ids: list[str], variant: str, impl: str, scope: str,
             graph: list[tuple[str, float | None, float | None, str]], verdict: dict, blocked: str | None = None,
             arm: str = "graph") -> None:  # fmt: skip
        cell = f"{sid}.{variant}"
        ids = []
        for k, (outcome, ms, peak, reason) in enumerate(graph, 1):
            prow = self._plan_row(shape, sid, cell, arm, variant, impl, scope, k, blocked)
            if not blocked:
                self._run(prow, outcome, ms, peak, reason)
            ids.append(prow["run_id"])
        row = {c: None for c in COMPARISON_COLUMNS}
        timed = verdict.get("speedup") is not None
        defaults = dict(thin=False, resolution_limited=False, design="unpaired" if timed else "",
                        eager_spread="observed" if timed else None, graph_spread="observed" if timed else None,
                        # a timed cell's graph runs follow eager's loss unless the case says otherwise
                        loss_parity="ok" if timed else None, loss_checked=len(graph) if timed else None,
                        loss_departed=0 if timed else None, loss_tolerance=0.005 if timed else None)
        row.update(sweep=SWEEP, cell_id=cell, shape_id=sid, variant=variant, impl=impl, scope=scope, **shape,
                   eager_run_ids=eager_ids, graph_run_ids=ids, eager_run_id=eager_ids[0], graph_run_id=ids[0],
                   margin=0.02, alpha=0.05, control=arm == "control", **{**defaults, **verdict})  # fmt: skip
        row["reason"] = prose.reason(row)  # the sentence the judge writes from these fields
        self.comparison.append(row)

    def write(self, folder: Path) -> dict[str, Path]:
        axes = ["hidden", "micro_batch"]
        paths = {k: folder / f"{k}.parquet" for k in ("plan", "runs", "iterations", "comparison")}
        write_table(pd.DataFrame(self.plan)[PLAN_COLUMNS + axes], paths["plan"], "plan",
                    extra={"spec": {"sweep": SWEEP, "margin": 0.02, "description": "Tiny Llama on one H200"}})  # fmt: skip
        write_table(pd.DataFrame(self.runs), paths["runs"], "runs")
        write_table(pd.DataFrame(self.iters), paths["iterations"], "iterations")
        comp = pd.DataFrame(self.comparison)
        comp = comp[COMPARISON_COLUMNS[:6] + axes + [c for c in comp.columns if c not in COMPARISON_COLUMNS[:6] + axes]]
        write_table(comp, paths["comparison"], "comparison", extra={"margin": 0.02, "paired": False})
        return paths


def _ok(ms: float, peak: float, n: int = 3) -> list[tuple[str, float, float, str]]:
    return [("completed", ms * f, peak, "") for f in (1.0, 1.012, 0.991)[:n]]


def build_sweep(folder: Path, aa: bool = True) -> dict[str, Path]:
    """Four shapes x two variants (+ an A/A control) with one cell of each outcome a user must recognise.

    Constructed tables (named so): the verdict fields are typed here, the sentences come from judge/prose.py.
    """
    s = Sweep()
    both = dict(paired_outcome="both-completed", eager_outcomes=["completed"] * 3, graph_outcomes=["completed"] * 3)
    # Shape 1: host-bound tiny Llama (fixtures/megatron-h200: eager 63.4 ms, TE attn 39.9 ms, full 9.2 ms).
    sh = {"hidden": 1024, "micro_batch": 1}
    sid, e = s.shape(sh, _ok(63.4, 10.4))
    s.cell(sh, sid, e, "full_iteration", "full_iteration", "", _ok(9.2, 12.1),
           dict(verdict="speedup", speedup=6.89, ci_low=6.71, ci_high=7.08, p_beyond=1e-6, q_value=6e-6, n_eager=3, n_graph=3,
                eager_step_ms=63.4, graph_step_ms=9.2, eager_mem_gb=10.4, graph_mem_gb=12.1, mem_delta_gb=1.7,
                **both))  # fmt: skip
    s.cell(sh, sid, e, "attn", "transformer_engine", "attn", _ok(39.9, 10.9),
           dict(verdict="speedup", speedup=1.59, ci_low=1.52, ci_high=1.66, p_beyond=2e-5, q_value=4e-5, n_eager=3, n_graph=3,
                eager_step_ms=63.4, graph_step_ms=39.9, eager_mem_gb=10.4, graph_mem_gb=10.9, mem_delta_gb=0.5,
                **both))  # fmt: skip
    if aa:
        s.cell(sh, sid, e, "aa", "none", "", _ok(63.1, 10.4),
               dict(verdict="neutral", speedup=1.004, ci_low=0.985, ci_high=1.019, p_beyond=0.61, n_eager=3, n_graph=3,
                    eager_step_ms=63.4, graph_step_ms=63.1, **both),
               arm="control")  # fmt: skip
    # Shape 2: launch-bound with job-to-job noise on the eager arm (h200-probe: 15 vs 18 ms).
    sh = {"hidden": 1024, "micro_batch": 2}
    sid, e = s.shape(sh, [("completed", 15.3, 6.2, ""), ("completed", 18.1, 6.2, ""), ("completed", 16.0, 6.2, "")])
    s.cell(sh, sid, e, "full_iteration", "full_iteration", "", _ok(15.9, 6.9),
           dict(verdict="inconclusive", speedup=1.03, ci_low=0.86, ci_high=1.24, p_beyond=0.41, q_value=0.55, n_eager=3,
                n_graph=3, eager_step_ms=16.0, graph_step_ms=15.9, eager_mem_gb=6.2, graph_mem_gb=6.9, mem_delta_gb=0.7,
                repeats_needed=14, **both))  # fmt: skip
    s.cell(sh, sid, e, "attn", "transformer_engine", "attn", [("completed", 16.2, 6.3, "")],
           dict(verdict="inconclusive", speedup=1.002, ci_low=0.6, ci_high=1.7, p_beyond=0.8, q_value=0.8, n_eager=3, n_graph=1,
                thin=True, graph_spread="allowance", repeats_needed=4, eager_step_ms=16.0, graph_step_ms=16.2,
                eager_mem_gb=6.2, graph_mem_gb=6.3, mem_delta_gb=0.1, **both))  # fmt: skip
    # Shape 3: the graph's static buffers do not fit; TE attn is a little slower.
    sh = {"hidden": 2048, "micro_batch": 1}
    sid, e = s.shape(sh, _ok(41.0, 118.0))
    s.cell(sh, sid, e, "full_iteration", "full_iteration", "", [("oom", None, None, OOM_TEXT)] * 3,
           dict(verdict="oom", n_eager=3, n_graph=0, eager_step_ms=41.0, eager_mem_gb=118.0, paired_outcome="graph-only-oom",
                eager_outcomes=["completed"] * 3, graph_outcomes=["oom"] * 3, failure_run_id=f"{sid}.full_iteration.r1",
                failure_detail=OOM_TEXT))  # fmt: skip
    s.cell(sh, sid, e, "attn", "transformer_engine", "attn", _ok(43.1, 121.5),
           dict(verdict="slowdown", speedup=0.951, ci_low=0.938, ci_high=0.964, p_beyond=3e-4, q_value=5e-4, n_eager=3, n_graph=3,
                eager_step_ms=41.0, graph_step_ms=43.1, eager_mem_gb=118.0, graph_mem_gb=121.5, mem_delta_gb=3.5,
                **both))  # fmt: skip
    # Shape 4: preflight blocks full_iteration (NaN check left on); the eager arm itself runs out of memory.
    sh = {"hidden": 2048, "micro_batch": 2}
    sid, e = s.shape(sh, [("oom", None, None, OOM_TEXT)] * 3)
    s.cell(sh, sid, e, "full_iteration", "full_iteration", "", [("blocked", None, None, "")] * 3,
           dict(verdict="blocked", failure_detail=NAN_RULE, rule_id="full_iteration_nan_check", gpu_seconds=0.0),
           blocked=NAN_RULE)  # fmt: skip
    s.cell(sh, sid, e, "attn", "transformer_engine", "attn", [("oom", None, None, OOM_TEXT)] * 3,
           dict(verdict="baseline-failed", n_eager=0, n_graph=0, paired_outcome="both-oom", eager_outcomes=["oom"] * 3,
                graph_outcomes=["oom"] * 3, failure_run_id=f"{sid}.eager.r1", failure_detail=OOM_TEXT))  # fmt: skip
    return s.write(folder)


# --------------------------------------------------------------------------------------------------
# Headless Chromium (Debian `chromium`)
WIDTH, HEIGHT = 1400, 2400


def chromium() -> str:
    """The browser, or a skip; a failure when CI is set, so CI cannot pass without having looked."""
    exe = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if exe:
        return exe
    reason = "headless Chromium not found (/usr/bin/chromium): install it with `apt-get install chromium`"
    if os.environ.get("CI"):
        pytest.fail(reason + " (CI is set, so the browser check may not be skipped)")
    pytest.skip(reason)


def run_chromium(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
    ]  # fmt: skip
    return subprocess.run([exe, *flags, *args], capture_output=True, text=True, timeout=180, check=False)


# --------------------------------------------------------------------------------------------------
# The benchmarks' scripts
def benchmark(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module (realjobs: every real H200 job committed here, parsed by graphsweep). Loaded by
    path, once, under its own name (so a benchmark that imports another finds the same module): benchmarks/ is no
    package and goes on no test's sys.path."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec and spec.loader, name
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


LOGS = ROOT / "tests" / "fixtures" / "logs"  # real logs (tests/fixtures/README.md)
# Hand-made runs on one H200: eager, TE scoped attn, local full-iteration, and a config Bridge rejected.
BY_HAND = {
    "sweep": "h200-by-hand",
    "description": "Megatron Bridge runs made by hand before graphsweep, ingested",
    "workload": {"kind": "megatron_bridge", "recipe": "vanilla_gpt_pretrain_config"},
    "source": {"logs": str(LOGS / "megatron-h200"), "pattern": r"(?P<variant>eager|te_attn|local_full|invalid_full)\.log"},
    "axes": {"model.seq_length": [1024]},
    "variants": [
        {"name": "te_attn", "impl": "transformer_engine", "scope": ["attn"]},
        {"name": "local_full", "impl": "local", "scope": ["full_iteration"]},
        {"name": "invalid_full", "impl": "full_iteration", "overrides": {"rerun_state_machine.check_for_nan_in_loss": True}},
    ],
    "repeats": 1,
    "warmup": 3,
    "iterations": 26,
}  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Hostile input (tests/house/test_hostile_*.py, tests/store/test_archive_hostile.py): the CLI in process, a spec with
# keys changed, an archive rewritten member by member

def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """The real `graphsweep` CLI in this process: (exit status, stdout, stderr)."""
    from graphsweep import cli

    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(rc: int, err: str, *needles: str) -> str:
    """A refusal: exit status 2 and one line on stderr, no traceback, holding every needle."""
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, err)
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def spec_with(base: dict, **changes: object) -> dict:
    """A copy of a spec with keys changed, given as paths: `executor/slurm/comment=...`, `fixed/est_step_s=...`."""
    import copy

    spec = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, last = dotted.split("/")
        node = spec
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return spec


def rewrite_archive(src: Path, dest: Path, manifest, rename=lambda name: name) -> Path:
    """The archive with another manifest (and member names), every other byte as it was, as a tar tool would."""
    import io
    import json
    import tarfile

    with tarfile.open(src, "r:gz") as tin, tarfile.open(dest, "w:gz") as tout:
        for m in tin:
            data = tin.extractfile(m).read() if m.isfile() else None
            if m.name.endswith("/manifest.json"):
                data = manifest(json.loads(data))
                data = data if isinstance(data, bytes) else json.dumps(data).encode()
                m.size = len(data)
            m.name = rename(m.name)
            m.pax_headers.pop("path", None)  # a long name lives there in PAX archives: the new one is m.name
            tout.addfile(m, io.BytesIO(data) if data is not None else None)
    return dest


# A committed sweep with some runs' logs edited, parsed again as the workflow's parse and aggregate rules would
def reparsed_sweep(sweep: Path, dest: Path, logs: dict[str, Path]) -> tuple[Path, Path]:
    """(runs.parquet, iterations.parquet) of the committed sweep `sweep` with each named run parsed from `logs[run_id]`
    (a user's edited copy of its log, or the log itself) with its config.yaml, as the parse rule does; written to
    `dest`, for the workflow's compare step (judge/compare.py compare) to judge with the sweep's plan.parquet."""
    runs = read_table(sweep / "runs.parquet", "runs")
    its = read_table(sweep / "iterations.parquet", "iterations")
    rows = {r["run_id"]: r for r in runs.to_dict("records")}
    for rid, log in logs.items():
        cfg = yaml.safe_load((sweep / "runs" / rid / "config.yaml").read_text())
        arm = GRAPH if cfg["run"]["arm"] == GRAPH else EAGER
        parsed = parse_run([log], arm=arm, warmup=int(cfg["run"]["warmup"]), run_id=rid, given=given_config(cfg))
        rows[rid].update({k: v for k, v in parsed.summary.to_dict().items() if k not in SUMMARY_NOT_COLUMNS})
        its = pd.concat([its[its.run_id != rid], parsed.iterations], ignore_index=True)
    dest.mkdir(parents=True, exist_ok=True)
    write_table(pd.DataFrame(list(rows.values())), dest / "runs.parquet", "runs")
    write_table(its, dest / "iterations.parquet", "iterations")
    return dest / "runs.parquet", dest / "iterations.parquet"
