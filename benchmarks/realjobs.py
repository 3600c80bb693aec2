"""The pool of real H200 jobs in this repository: one record per job, parsed by graphsweep itself.

The statistics are validated on these (benchmarks/validate_stats.py, tests/judge/test_statistics_real.py): truth is
what real jobs did, not a model. A configuration is one source, shape and variant; its jobs are the replicates.

Sources (all committed, all from real NVIDIA H200s, 2026-11-30 and 2026-12-01):
- benchmarks/data/h200-jobs: 36 probe.py jobs (medium eager / full_iteration, large eager), README there;
- benchmarks/data/h200-extra: 96 probe.py jobs (small / medium / large x eager / full_iteration), README there;
- tests/fixtures/h200: one job each of eager, full_iteration, attn+mlp of the medium shape;
- results/examples/{h200-builtin, megatron-tiny-vanilla-gpt, megatron-tiny-moe, megatron-1b-dense,
  megatron-moe-128e}/runs: five whole sweeps (the 1.2B dense model and the builtin rerun with the GPU-busy diagnostic
  are from 2026-12-01 evening, the 128-expert MoE from 2026-12-04: the decision loop with quiet jobs);
- benchmarks/data/h200-moe-128e-sweep-a/runs: the 128-expert MoE of 2026-12-02 (3 repeats, default settings);
- benchmarks/data/{h200-builtin-sweep-a, h200-dense-sweep-a}/runs: the earlier builtin sweep and the dense spec's
  earlier sweep on another H200 (READMEs there).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from graphsweep.parse.run import parse_run
from graphsweep.layout import RunDir
from graphsweep.vocab import AA, EAGER, GRAPH, USABLE_OUTCOMES

REPO = Path(__file__).resolve().parents[1]
# source name -> its run folders; a builtin sweep seeds repeat k with k (--seed {repeat}), Megatron logs say theirs
SWEEPS = {
    "h200-builtin": REPO / "results/examples/h200-builtin/runs",
    "megatron-tiny-vanilla-gpt": REPO / "results/examples/megatron-tiny-vanilla-gpt/runs",
    "megatron-tiny-moe": REPO / "results/examples/megatron-tiny-moe/runs",
    "megatron-1b-dense": REPO / "results/examples/megatron-1b-dense/runs",
    "megatron-moe-128e": REPO / "results/examples/megatron-moe-128e/runs",
    "h200-moe-128e-sweep-a": REPO / "benchmarks/data/h200-moe-128e-sweep-a/runs",
    "h200-builtin-sweep-a": REPO / "benchmarks/data/h200-builtin-sweep-a/runs",
    "h200-dense-sweep-a": REPO / "benchmarks/data/h200-dense-sweep-a/runs",
}
BUILTIN_SWEEPS = ("h200-builtin", "h200-builtin-sweep-a")
PROBE_WARMUP = 3  # probe.py: cuda graph warmup 3, capture on iteration 4


@dataclass(frozen=True)
class Job:
    source: str
    shape: str  # source/shape
    config: str  # source/shape/variant
    variant: str
    arm: str  # EAGER | GRAPH
    run_id: str
    path: str
    outcome: str
    usable: bool
    median_ms: float | None
    print_step_ms: float  # from the log's own digits (parse: elapsed_resolution_ms)
    step_ms: tuple[float, ...]  # the steady window's iteration times
    seed: int | None  # the seed the run trained with (log or command)
    loss: tuple[tuple[int, float], ...]  # (iteration, lm loss), every iteration printed
    warmup: int = PROBE_WARMUP  # cuda_graph_warmup_steps it ran with (capture on warmup + 1)

    @property
    def losses(self) -> dict[int, float]:
        return dict(self.loss)


def _job(path: Path, source: str, shape: str, variant: str, run_id: str, warmup: int, seed: int | None) -> Job:
    arm = EAGER if variant in (EAGER, AA) else GRAPH  # an A/A control run is an eager run
    pr = parse_run([path], arm=arm, warmup=warmup, run_id=run_id)
    s, df = pr.summary, pr.iterations
    usable = s.outcome in USABLE_OUTCOMES and s.steady_first is not None
    steady: tuple[float, ...] = ()
    if usable:
        sel = (df.iteration >= s.steady_first) & (df.iteration <= s.steady_last)
        steady = tuple(float(x) for x in df.elapsed_ms[sel].dropna())
    loss = tuple((int(i), float(x)) for i, x in zip(df.iteration, df.loss) if not math.isnan(x))
    return Job(source, f"{source}/{shape}", f"{source}/{shape}/{variant}", variant, arm, run_id, str(path), s.outcome,
               bool(usable and steady), s.step_ms_median, s.elapsed_resolution_ms or 0.1, steady,
               s.seed if s.seed is not None else seed, loss, warmup)


@functools.lru_cache(maxsize=1)
def pool() -> tuple[Job, ...]:
    """Every real job (usable or not), parsed once per process."""
    out: list[Job] = []
    for name, mode_of in (("h200-jobs", {"eager": EAGER, "graph": "full_iteration"}),
                          ("h200-extra", {"eager": EAGER, "full_iteration": "full_iteration"})):
        for p in sorted((REPO / "benchmarks/data" / name).glob("*.log")):
            shape, mode, _ = p.stem.split("-")
            out.append(_job(p, name, shape, mode_of[mode], p.stem, PROBE_WARMUP, 0))  # one seed for every job
    fx = REPO / "tests/fixtures/h200"  # one job per config (README there); the concatenated capped-shape file skipped
    for name, variant in (("eager", EAGER), ("full", "full_iteration"), ("attnmlp", "attn+mlp")):
        out.append(_job(fx / f"{name}.log", "tests-h200", "medium", variant, name, PROBE_WARMUP, 0))
    for sweep, folder in SWEEPS.items():
        for d in sorted(folder.iterdir()):
            run = yaml.safe_load(RunDir(d).config.read_text())["run"]
            seed = run["repeat"] if sweep in BUILTIN_SWEEPS else None  # builtin: --seed {repeat}; Megatron: its log
            out.append(_job(RunDir(d).log, sweep, run["shape_id"], run["variant"], run["run_id"],
                            int(run.get("warmup", PROBE_WARMUP)), seed))
    return tuple(out)


def configs(usable_only: bool = True) -> dict[str, list[Job]]:
    """config -> its jobs, in file order."""
    by: dict[str, list[Job]] = {}
    for j in pool():
        if j.usable or not usable_only:
            by.setdefault(j.config, []).append(j)
    return by


def jobs(config: str, run_ids: list[str] | None = None) -> list[Job]:
    """The usable jobs of one configuration (optionally only these run ids), in file order."""
    rs = configs().get(config, [])
    if not rs:
        raise KeyError(f"no usable real jobs for config {config!r}; known: {', '.join(sorted(configs()))}")
    return [r for r in rs if run_ids is None or r.run_id in run_ids]
