"""The decision loop on real H200 jobs: its false decisions, its power and its GPU cost, by resampling.

It runs the loop as implemented (judge/loop.py `step` on interval.judge at each look's repeated confidence interval,
judge/sequential.py) on sweeps whose jobs are drawn from the committed real runs (benchmarks/realjobs.py):

- MoE design: the 128-expert dropless MoE's sweeps (benchmarks/data/h200-moe-128e-sweep-a, 2026-12-02, and
  results/examples/megatron-moe-128e, 2026-12-04): eager baseline, A/A control and 3 graph variants. Their eager-like
  jobs (eager + A/A) give the baseline's job-to-job noise, their graph jobs (attn, attn+router+pre, router+pre) the
  graph arms' (residuals of log medians around each configuration's mean, scaled by sqrt(n / (n - 1)), drawn with
  replacement and smoothed: the pools are too small to draw without);
- dense design: the 1.2B dense sweep's two shapes (results/examples/megatron-1b-dense): eager, A/A and 2 variants;
- A/A without replacement: every configuration with >= 16 real jobs (benchmarks/data/h200-extra), split into two
  disjoint random halves of up to 8 jobs (eager, control), as an A/A cell of a sweep with one null variant drawn from
  the same configuration.

Per design it prints, over `--draws` sweeps: the share of null sweeps (every variant a true 1.0x) in which any
variant or the A/A control is decided a speedup or slowdown (the sequential procedure's false decisions, the
family gate included); the power to decide a speedup of a variant whose true ratio is 1.1x, 1.15x, 1.2x (the other
variants null: the family gate's hardest case); the jobs and GPU-hours a sweep takes and the GPU-hours per decided
cell; and the same for today's fixed design (3 repeats per arm, one look at alpha 0.05, the same gate).

    .venv/bin/python benchmarks/validate_decide.py                     # the tables of docs/statistics.md
    .venv/bin/python benchmarks/validate_decide.py --draws 200 --designs hsd:1:16  # one loop design, fewer draws
    .venv/bin/python benchmarks/validate_decide.py --sweeps dense          # the dense sweeps only (then no A/A table)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
import realjobs  # noqa: E402

from graphsweep.judge import interval as iv  # noqa: E402
from graphsweep.judge import loop  # noqa: E402
from graphsweep.judge.design import Design  # noqa: E402
from graphsweep.vocab import LOOP_DECIDED, NEUTRAL, SLOWDOWN, SPEEDUP  # noqa: E402

MARGIN, ALPHA = 0.02, 0.05
SMOOTH = 0.5  # jitter of a drawn residual, in units of the pool's sd (Noise.arm)
RATIOS = (1.1, 1.15, 1.2)


class Arm:
    """A lazily drawn sequence of jobs (log median, print step ms): take(n) returns its first n, so repeats add up."""

    def __init__(self, draw):
        self._draw, self._jobs = draw, []

    def take(self, n: int) -> tuple[list[float], list[float]]:
        while len(self._jobs) < n:
            self._jobs.append(self._draw())
        jobs = self._jobs[:n]
        return [math.exp(m) for m, _ in jobs], [q for _, q in jobs]


@dataclass(frozen=True)
class Noise:
    """Job-to-job noise of an arm: residuals of real log medians and their print steps; drawn with replacement."""

    residuals: np.ndarray
    steps: np.ndarray

    @classmethod
    def of(cls, configs: list[str]) -> Noise:
        res, steps = [], []
        for c in configs:
            jobs = realjobs.jobs(c)
            logs = np.log([j.median_ms for j in jobs])
            res += list((logs - logs.mean()) * math.sqrt(len(logs) / (len(logs) - 1)))
            steps += [j.print_step_ms for j in jobs]
        return cls(np.array(res), np.array(steps))

    def arm(self, level_ms: float, rng: np.random.Generator) -> Arm:
        """Smoothed bootstrap: a residual plus normal jitter of SMOOTH x its sd, rescaled to keep the variance. From a
        pool of 6 jobs a plain bootstrap repeats a job in 44 % of 3-job draws, and intervals from such draws are too
        narrow (a false-decision rate the real jobs do not have); the jitter keeps the pool's shape and spread."""
        sd = float(np.std(self.residuals))

        def draw():
            i = rng.integers(len(self.residuals))
            x = (float(self.residuals[i]) + SMOOTH * sd * rng.standard_normal()) / math.sqrt(1 + SMOOTH**2)
            return math.log(level_ms) + x, float(self.steps[i])
        return Arm(draw)


@dataclass(frozen=True)
class SweepDesign:
    name: str
    eager: Noise
    graph: Noise
    level_ms: float  # eager step time
    variants: int  # graph variants besides the A/A control
    gpu_s_per_job: float  # GPU-seconds of one job of the real sweep


@dataclass
class Result:
    verdicts: dict[str, str]  # cell -> final verdict (after the family gate)
    statuses: dict[str, str]
    jobs: int


def run_loop(eager: Arm, control: Arm, graphs: dict[str, Arm], design: Design | None, max_repeats: int,
             pool: bool = False) -> Result:
    """One sweep of one shape through the loop (design None: today's fixed design, one look of design.first... 3)."""
    cells = {c: ("s", False) for c in graphs} | {"aa": ("s", True)}
    states = loop.new_states(cells)
    looks = design.looks if design else (3,)
    jobs, have = 0, 0
    for k, n in enumerate(looks, start=1):
        if n > max_repeats:
            break
        todo = loop.judged_now(states) if k > 1 else list(cells)
        if not todo:
            break
        live = [c for c in todo if c != "aa"]
        jobs += (n - have) * (2 + len(live))  # eager + control + each live graph arm
        have = n
        judged = {}
        e_ms, e_q = eager.take(n)
        c_ms, c_q = control.take(n)
        for c in todo:
            g_ms, g_q = (c_ms, c_q) if c == "aa" else graphs[c].take(n)
            base_ms, base_q = (e_ms + c_ms, e_q + c_q) if pool and c != "aa" else (e_ms, e_q)
            look = iv.Look(design, k) if design else None
            j = iv.judge(base_ms, g_ms, eager_step_ms=base_q, graph_step_ms=g_q, margin=MARGIN, alpha=ALPHA, look=look)
            judged[c] = loop.Judged(j.verdict, j.ratio, j.lo, j.hi, j.p_beyond)
        loop.step(states, judged, k, margin=MARGIN, alpha=ALPHA)
    loop.close(states)
    verdicts = {}
    for c, s in states.items():
        v = s.judged.verdict if s.judged else "none"
        if v in (SPEEDUP, SLOWDOWN) and not s.control and (s.q is None or s.q >= ALPHA):
            v = "inconclusive"
        verdicts[c] = v
    return Result(verdicts, {c: s.status for c, s in states.items()}, jobs)


def sweep(d: SweepDesign, ratios: list[float], design: Design | None, max_repeats: int,
          rng: np.random.Generator, pool: bool = False) -> Result:
    eager, control = d.eager.arm(d.level_ms, rng), d.eager.arm(d.level_ms, rng)
    graphs = {f"v{i}": d.graph.arm(d.level_ms / r, rng) for i, r in enumerate(ratios)}
    return run_loop(eager, control, graphs, design, max_repeats, pool)


def moe_designs() -> list[SweepDesign]:
    """The 128-expert MoE twice: on the 2026-12-02 host with default settings (3 repeats), and on the 2026-12-04 host
    with quiet jobs through the decision loop (5-6 repeats)."""
    out = []
    for source, when, level, gpu_s in (("h200-moe-128e-sweep-a", "2026-12-02", 550.0, 53.3),
                                       ("megatron-moe-128e", "2026-12-04, quiet", 470.0, 45.6)):
        src = f"{source}/s4096-f2da0d"
        eager = Noise.of([f"{src}/eager", f"{src}/aa"])
        graph = Noise.of([f"{src}/attn", f"{src}/attn+router+pre", f"{src}/router+pre"])
        out.append(SweepDesign(f"MoE 128 experts ({when})", eager, graph, level, 3, gpu_s))
    return out


def dense_designs() -> list[SweepDesign]:
    out = []
    for shape, gpu_s in (("s512-ca7740", 37.5), ("s4096-3eeebf", 40.8)):
        src = f"megatron-1b-dense/{shape}"
        out.append(SweepDesign(f"1.2B dense {shape.split('-')[0]}", Noise.of([f"{src}/eager", f"{src}/aa"]),
                               Noise.of([f"{src}/attn+mlp", f"{src}/full_iteration"]),
                               float(np.median([j.median_ms for j in realjobs.jobs(f'{src}/eager')])), 2, gpu_s))
    return out


def big_configs(min_jobs: int = 16) -> list[str]:
    return [c for c, jobs in realjobs.configs().items() if len(jobs) >= min_jobs]


def aa_without_replacement(config: str, design: Design | None, max_repeats: int, rng, pool: bool = False) -> Result:
    """An A/A cell and one null variant from disjoint draws of one configuration's real jobs."""
    jobs = realjobs.jobs(config)
    order = rng.permutation(len(jobs))
    third = len(jobs) // 3
    parts = [order[:third], order[third:2 * third], order[2 * third:3 * third]]

    def arm(idx):
        it = iter(idx)
        return Arm(lambda: (lambda j: (math.log(j.median_ms), j.print_step_ms))(jobs[next(it)]))

    return run_loop(arm(parts[0]), arm(parts[1]), {"v0": arm(parts[2])}, design, min(max_repeats, third), pool)


def parse_design(text: str) -> tuple[str, Design | None, int, bool]:
    """'fixed' or SPENDING:STEP:HORIZON[:MAX][:GAMMA] (first look 3); a trailing '+pool' judges the graph cells against
    the eager and A/A control runs together (both are eager runs of the shape)."""
    pool = text.endswith("+pool")
    text = text.removesuffix("+pool")
    if text == "fixed":
        return "fixed 3+3, one look" + (", pooled baseline" if pool else ""), None, 3, pool
    parts = text.split(":")
    spending, step, horizon = parts[0], int(parts[1]), int(parts[2])
    cap = int(parts[3]) if len(parts) > 3 else 8
    gamma = float(parts[4]) if len(parts) > 4 else 1.0
    name = f"{spending} step {step} horizon {horizon} max {cap}" + (", pooled baseline" if pool else "")
    return name, Design(3, step, horizon, spending, gamma), cap, pool


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--designs", nargs="+", default=["fixed", "hsd:1:16:8", "pocock:1:16:8", "obrien-fleming:1:16:8",
                                                       "hsd:1:8:8", "hsd:2:16:8"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweeps", default="", help="only the sweeps whose name contains this text ('A/A': only the "
                    "A/A table; 'none': skip the A/A table)")
    args = ap.parse_args(argv)
    t0 = time.time()
    sweeps = [d for d in [*moe_designs(), *dense_designs()] if args.sweeps in d.name]
    print(f"# pool parsed in {time.time() - t0:.0f} s; {args.draws} sweeps per row\n")
    print("| sweep | design | null sweeps: any false decision | A/A decided | power 1.1x | power 1.15x | power 1.2x "
          "| jobs per sweep (1.15x) | GPU-h per sweep (1.15x) | GPU-h per decided cell (1.15x) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in sweeps:
        for text in args.designs:
            name, design, cap, pool = parse_design(text)
            rng = np.random.default_rng(args.seed)
            false = aa = 0
            for _ in range(args.draws):
                r = sweep(d, [1.0] * d.variants, design, cap, rng, pool)
                false += any(v in (SPEEDUP, SLOWDOWN) for c, v in r.verdicts.items())
                aa += r.verdicts["aa"] in (SPEEDUP, SLOWDOWN)
            power, jobs, decided = {}, [], []
            for ratio in RATIOS:
                hits = 0
                for _ in range(args.draws):
                    r = sweep(d, [ratio] + [1.0] * (d.variants - 1), design, cap, rng, pool)
                    hits += r.verdicts["v0"] == SPEEDUP
                    if ratio == 1.15:
                        jobs.append(r.jobs)
                        decided.append(sum(s == LOOP_DECIDED or r.verdicts[c] in (SPEEDUP, SLOWDOWN, NEUTRAL)
                                           for c, s in r.statuses.items() if c != "aa"))
                power[ratio] = hits / args.draws
            gpu_h = np.mean(jobs) * d.gpu_s_per_job / 3600
            per_decided = np.sum(jobs) * d.gpu_s_per_job / 3600 / max(1, np.sum(decided))
            print(f"| {d.name} | {name} | {false / args.draws:.1%} | {aa / args.draws:.1%} | {power[1.1]:.0%} | "
                  f"{power[1.15]:.0%} | {power[1.2]:.0%} | {np.mean(jobs):.1f} | {gpu_h:.2f} | {per_decided:.3f} |",
                  flush=True)
    if args.sweeps not in ("", "A/A"):
        return 0
    print("\nA/A without replacement (configurations with >= 16 real jobs; an A/A cell and one null variant):\n")
    print("| configuration | design | any false decision | A/A decided |")
    print("|---|---|---|---|")
    for config in big_configs():
        for text in args.designs:
            name, design, cap, pool = parse_design(text)
            rng = np.random.default_rng(args.seed)
            false = aa = 0
            for _ in range(args.draws):
                r = aa_without_replacement(config, design, cap, rng, pool)
                false += any(v in (SPEEDUP, SLOWDOWN) for v in r.verdicts.values())
                aa += r.verdicts["aa"] in (SPEEDUP, SLOWDOWN)
            print(f"| {config} | {name} | {false / args.draws:.1%} | {aa / args.draws:.1%} |", flush=True)
    print(f"\n# {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
