"""Validate the cell statistics (graphsweep/judge/interval.py) by resampling real H200 jobs without replacement.

Truth is what the real jobs say, not a model: for A/A designs both arms are disjoint sets of jobs of ONE
configuration (true ratio 1); for eager-vs-graph designs the arms are drawn from the eager and the graph
configuration of one shape, and the truth is the all-jobs estimate (every job of both configurations). The jobs
are benchmarks/realjobs.py's pool: every real H200 job committed in this repository.

Per design (jobs per arm, eager + graph; "->" = a second look after more-repeats) it prints:
- A/A false verdicts: share of speedup/slowdown verdicts (each configuration weighted equally; worst configuration
  among those with >= 8 jobs in brackets), and the A/A interval coverage of 1;
- eager-vs-graph detection: share of draws reaching the all-jobs verdict, over the pairs whose all-jobs
  verdict is speedup/slowdown; false verdicts there (a verdict the all-jobs estimate contradicts); interval
  coverage of the all-jobs estimate.
A configuration (pair) takes part in a design only when the design leaves at least one of its jobs out.

    .venv/bin/python benchmarks/validate_stats.py                 # the table of docs/statistics.md (~1 min)
    .venv/bin/python benchmarks/validate_stats.py --detail        # per-configuration rows as well
    .venv/bin/python benchmarks/validate_stats.py --only 3+3 --draws 300
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
import realjobs  # noqa: E402

from graphsweep.judge import interval as J  # noqa: E402
from graphsweep.vocab import EAGER, INCONCLUSIVE, NEUTRAL, SLOWDOWN, SPEEDUP  # noqa: E402



@dataclass
class Config:
    name: str
    shape: str
    arm: str
    medians: np.ndarray
    steps: np.ndarray


def load_pool() -> dict[str, Config]:
    out: dict[str, Config] = {}
    for name, rs in realjobs.configs().items():
        out[name] = Config(name, rs[0].shape, rs[0].arm, np.array([r.median_ms for r in rs]),
                           np.array([r.print_step_ms for r in rs]))
    return out


@dataclass(frozen=True)
class Design:
    ke: int  # eager jobs at the first look
    kg: int  # graph jobs at the first look
    second_look: bool = False  # inconclusive -> more repeats (planned n) -> judged again
    corrected: bool = True  # second look: alpha split over the two looks (False: alpha at both looks)

    @property
    def name(self) -> str:
        base = f"{self.ke}+{self.kg}"
        if not self.second_look:
            return base
        return base + (" -> planned n" if self.corrected else " -> planned n, uncorrected")


DESIGNS = [Design(1, 1), Design(1, 2), Design(1, 3), Design(3, 1), Design(1, 5), Design(2, 2), Design(2, 5),
           Design(5, 2), Design(3, 3), Design(3, 5), Design(5, 3), Design(5, 5),
           Design(1, 1, True), Design(2, 2, True), Design(3, 3, True),
           Design(1, 1, True, False), Design(2, 2, True, False), Design(3, 3, True, False)]


# ------------------------------------------------------------------------------------------------------------
# The judge (graphsweep/judge/interval.py) and the planner of the second look


@dataclass(frozen=True)
class Outcome:
    verdict: str
    lo: float
    hi: float


Judge = Callable[[Config, np.ndarray, Config, np.ndarray, float], Outcome]


def judge_new(ce: Config, ie: np.ndarray, cg: Config, ig: np.ndarray, alpha: float, margin: float,
              allowance: float | None, min_own_jobs: int) -> Outcome:
    j = J.judge(ce.medians[ie], cg.medians[ig], eager_step_ms=ce.steps[ie], graph_step_ms=cg.steps[ig],
                margin=margin, alpha=alpha, allowance=allowance, min_own_jobs=min_own_jobs)
    return Outcome(j.verdict, j.lo, j.hi)


def plan_new(ce: Config, ie: np.ndarray, cg: Config, ig: np.ndarray, margin: float, cap: int, alpha2: float,
             allowance: float | None, min_own_jobs: int) -> int:
    al = allowance if allowance is not None else J.SPREAD_ALLOWANCE
    e = J.summarize_arm(ce.medians[ie], ce.steps[ie], al, min_own_jobs)
    g = J.summarize_arm(cg.medians[ig], cg.steps[ig], al, min_own_jobs)
    n = J.repeats_for_power(e, g, margin=margin, alpha=alpha2, power=0.8, allowance=al, min_own_jobs=min_own_jobs,
                            cap=cap)
    return cap if n is None else n


# ------------------------------------------------------------------------------------------------------------
# Draws without replacement


def draws(n_e: int, n_g: int, same: bool, d: Design, limit: int, rng: np.random.Generator):
    """Index sets (eager first look, graph first look, eager reserve, graph reserve), without replacement.

    Every assignment when there are at most `limit` of them (single-look designs), else `limit` random ones.
    """
    if same:
        total = math.comb(n_e, d.ke) * math.comb(n_e - d.ke, d.kg)
    else:
        total = math.comb(n_e, d.ke) * math.comb(n_g, d.kg)
    if not d.second_look and total <= limit:
        idx = np.arange(n_e)
        for a in itertools.combinations(range(n_e), d.ke):
            rest = np.setdiff1d(idx, a) if same else np.arange(n_g)
            for b in itertools.combinations(rest, d.kg):
                yield np.array(a), np.array(b), None, None
        return
    for _ in range(limit):
        if same:
            p = rng.permutation(n_e)
            a, b, rest = p[: d.ke], p[d.ke : d.ke + d.kg], p[d.ke + d.kg :]
            yield a, b, rest[0::2], rest[1::2]  # the reserve, split between the arms
        else:
            pe, pg = rng.permutation(n_e), rng.permutation(n_g)
            yield pe[: d.ke], pg[: d.kg], pe[d.ke :], pg[d.kg :]


@dataclass
class Tally:
    n: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    covered: int = 0
    jobs: int = 0  # jobs per arm at the final look, summed (mean jobs per arm = jobs / n)

    def add(self, o: Outcome, truth: float, jobs: float) -> None:
        self.n += 1
        self.verdicts[o.verdict] = self.verdicts.get(o.verdict, 0) + 1
        self.covered += int(o.lo <= truth <= o.hi)
        self.jobs += jobs

    def share(self, *vs: str) -> float:
        return sum(self.verdicts.get(v, 0) for v in vs) / self.n if self.n else math.nan


def run_design(ce: Config, cg: Config, same: bool, d: Design, truth: float, judge: Judge, plan, limit: int,
               alpha: float, cap: int, rng: np.random.Generator) -> Tally | None:
    ne, ng = ce.medians.size, cg.medians.size
    extra = 2 if d.second_look else 0  # a second look needs room for >= 2 more jobs per arm
    if same and d.ke + d.kg + 2 * extra > ne:
        return None
    if not same and (d.ke + extra >= ne or d.kg + extra >= ng):  # and leaves a job of each configuration out
        return None
    t = Tally()
    a1 = J.alpha_for_look(1, 2, alpha) if d.second_look and d.corrected else alpha
    a2 = J.alpha_for_look(2, 2, alpha) if d.second_look and d.corrected else alpha
    for ie, ig, re_, rg in draws(ne, ng, same, d, limit, rng):
        o = judge(ce, ie, cg, ig, a1)
        if d.second_look and o.verdict == INCONCLUSIVE:
            room_e = ie.size + (re_.size if re_ is not None else 0)
            room_g = ig.size + (rg.size if rg is not None else 0)
            if not same:  # leave one job of each configuration out, so the truth is not the sample
                room_e, room_g = min(room_e, ne - 1), min(room_g, ng - 1)
            n2 = min(max(plan(ce, ie, cg, ig, cap), max(ie.size, ig.size) + 1), cap)
            ie2 = np.concatenate([ie, re_[: max(0, min(n2, room_e) - ie.size)]])
            ig2 = np.concatenate([ig, rg[: max(0, min(n2, room_g) - ig.size)]])
            o = judge(ce, ie2, cg, ig2, a2)
            t.add(o, truth, 0.5 * (ie2.size + ig2.size))
        else:
            t.add(o, truth, 0.5 * (ie.size + ig.size))
    return t if t.n else None


# ------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=2000, help="draws per configuration and design (default 2000)")
    ap.add_argument("--margin", type=float, default=J.MARGIN)
    ap.add_argument("--alpha", type=float, default=J.ALPHA)
    ap.add_argument("--allowance", type=float, default=J.SPREAD_ALLOWANCE,
                    help="spread allowance of a one-job arm (log sd); 0 = inconclusive-only")
    ap.add_argument("--cap", type=int, default=8, help="most jobs per arm after more-repeats (default 8)")
    ap.add_argument("--min-own-jobs", type=int, default=J.MIN_OWN_JOBS,
                    help="jobs an arm needs before its own spread counts (default %(default)s)")
    ap.add_argument("--detail", action="store_true")
    ap.add_argument("--only", default="", help="designs whose name contains this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    t0 = time.time()
    pool = load_pool()
    allowance = a.allowance if a.allowance > 0 else None
    judge: Judge = lambda ce, ie, cg, ig, al: judge_new(ce, ie, cg, ig, al, a.margin, allowance, a.min_own_jobs)  # noqa: E731
    a2 = J.alpha_for_look(2, 2, a.alpha)
    plan = lambda ce, ie, cg, ig, cap: plan_new(ce, ie, cg, ig, a.margin, cap, a2, allowance, a.min_own_jobs)  # noqa: E731

    aa = [c for c in pool.values() if c.medians.size >= 2]
    eager_of = {c.shape: c for c in pool.values() if c.arm == EAGER}
    pairs = [(eager_of[c.shape], c) for c in pool.values() if c.arm != EAGER and c.shape in eager_of]
    truth = {}
    for ce, cg in pairs:
        j = J.judge(ce.medians, cg.medians, eager_step_ms=ce.steps, graph_step_ms=cg.steps, margin=a.margin,
                    alpha=a.alpha, allowance=allowance)
        truth[cg.name] = (j.ratio, j.verdict)

    designs = [d for d in DESIGNS if a.only in d.name]
    print(f"# graphsweep.judge.interval, margin {a.margin:g}, alpha {a.alpha:g}, "
          f"allowance {allowance}, <= {a.draws} draws per configuration and design, seed {a.seed}; "
          f"pool: {sum(c.medians.size for c in pool.values())} jobs, {len(aa)} configurations with >= 2 jobs, "
          f"{len(pairs)} eager-vs-graph pairs ({sum(v[1] in (SPEEDUP, SLOWDOWN) for v in truth.values())} decisive)")
    print()
    print("| design (eager+graph jobs) | A/A configs | A/A false verdicts (worst, >= 8 jobs) | A/A neutral | A/A coverage (worst) "
          "| E-v-G pairs | detection | E-v-G false verdicts | E-v-G coverage (worst) | jobs/arm |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    out = []
    for di, d in enumerate(designs):
        rng = np.random.default_rng([a.seed, zlib.crc32(d.name.encode())])  # stable under --only
        aa_rows, eg_rows = [], []
        for c in aa:
            t = run_design(c, c, True, d, 1.0, judge, plan, a.draws, a.alpha, a.cap, rng)
            if t:
                aa_rows.append((c, t))
        for ce, cg in pairs:
            tr, tv = truth[cg.name]
            t = run_design(ce, cg, False, d, tr, judge, plan, a.draws, a.alpha, a.cap, rng)
            if t:
                eg_rows.append((cg, t, tr, tv))
        fp = [t.share(SPEEDUP, SLOWDOWN) for _, t in aa_rows]
        fp_big = [t.share(SPEEDUP, SLOWDOWN) for c, t in aa_rows if c.medians.size >= 8]
        cov = [t.covered / t.n for _, t in aa_rows]
        neu = [t.share(NEUTRAL) for _, t in aa_rows]
        dec = [(cg, t, tv) for cg, t, tr, tv in eg_rows if tv in (SPEEDUP, SLOWDOWN)]
        det = [t.share(tv) for _, t, tv in dec]
        eg_false = []
        for cg, t, tr, tv in eg_rows:
            wrong = (t.verdicts.get(SPEEDUP, 0) if tr <= 1 + a.margin else 0) + \
                    (t.verdicts.get(SLOWDOWN, 0) if tr >= 1 - a.margin else 0)
            eg_false.append(wrong / t.n)
        eg_cov = [t.covered / t.n for _, t, _, _ in eg_rows]
        jobs = [t.jobs / t.n for _, t in aa_rows] + [t.jobs / t.n for _, t, _, _ in eg_rows]
        mean = lambda x: float(np.mean(x)) if x else math.nan  # noqa: E731
        worst = lambda x, f=max: f(x) if x else math.nan  # noqa: E731
        row = dict(design=d.name, aa_configs=len(aa_rows), aa_false=mean(fp), aa_false_worst=worst(fp_big),
                   aa_neutral=mean(neu), aa_coverage=mean(cov), aa_coverage_worst=worst(cov, min), eg_pairs=len(eg_rows),
                   detection=mean(det), eg_false=mean(eg_false), eg_coverage=mean(eg_cov),
                   eg_coverage_worst=worst(eg_cov, min), jobs_per_arm=mean(jobs))
        out.append(row)
        pct = lambda x: "-" if x != x else f"{100 * x:.1f}%"  # noqa: E731
        print(f"| {d.name} | {len(aa_rows)} | {pct(row['aa_false'])} ({pct(row['aa_false_worst'])}) | {pct(row['aa_neutral'])} "
              f"| {pct(row['aa_coverage'])} ({pct(row['aa_coverage_worst'])}) | {len(eg_rows)} | {pct(row['detection'])} "
              f"| {pct(row['eg_false'])} | {pct(row['eg_coverage'])} ({pct(row['eg_coverage_worst'])}) | {row['jobs_per_arm']:.1f} |",
              flush=True)
        if a.detail:
            for c, t in aa_rows:
                print(f"|   A/A {c.name} ({c.medians.size} jobs, {t.n} draws) | | {pct(t.share(SPEEDUP, SLOWDOWN))} | "
                      f"{pct(t.share(NEUTRAL))} | {pct(t.covered / t.n)} | | | | | {t.jobs / t.n:.1f} |")
            for cg, t, tr, tv in eg_rows:
                print(f"|   E-v-G {cg.name} ({tv} {tr:.3f}x, {t.n} draws) | | | | | | {pct(t.share(tv))} | "
                      f"{t.verdicts} | {pct(t.covered / t.n)} | {t.jobs / t.n:.1f} |")
    worst_fp = max((r["aa_false"] for r in out), default=math.nan)
    print()
    print(f"worst design's A/A false-verdict rate: {100 * worst_fp:.1f}% (target <= 5%); {time.time() - t0:.0f} s")
    if a.json:
        a.json.write_text(json.dumps(dict(settings={k: str(v) for k, v in vars(a).items()}, designs=out), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
