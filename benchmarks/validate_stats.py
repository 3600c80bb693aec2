"""Validate graphsweep.stats.judge_cell on real iteration-time distributions.

Simulates sweep cells whose truth is known and prints how often the verdict is wrong:
- A/A (both arms from the same distribution): false-positive rate = share of speedup/slowdown
  verdicts (target <= 5 %), at the default settings (3 repeats per arm, margin 2 %, 95 %);
  also with 1 repeat per arm (within-run bootstrap), to show why one job is not enough.
- A/B (graph arm 5 % faster, eager/graph = 1.05): power = share of speedup verdicts (target
  >= 80 %), and the repeats per arm needed to reach 80 %.

Each simulated run: pick one real run of the group, resample its steady-window iteration times
(normalised to that run's median, so only its within-run shape is kept), multiply by the group
median, by a per-job level shift exp(N(0, sigma_job)) with sigma_job the observed sd of log
per-run medians across real jobs (or, with --levels empirical, a resampled real job level), and
by 1/1.05 for the graph arm of A/B cells; round to 0.1 ms as Megatron prints it.

Usage:
  .venv/bin/python benchmarks/validate_stats.py                     # defaults, ~1-3 min on 2 cores
  .venv/bin/python benchmarks/validate_stats.py --sims 300 --search-sims 100   # quick look
  .venv/bin/python benchmarks/validate_stats.py --group "my eager=/path/run-*.log"  # add real jobs
Documented figures: docs/statistics.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from graphsweep.judge.verdict import ArmRun, judge_cell  # noqa: E402
from graphsweep.parse.window import steady_window  # noqa: E402

FIXTURES = Path("/work/shared/fixtures")
H200_JOBS = ROOT / "benchmarks" / "data" / "h200-jobs"

# Megatron Bridge training_log (src/megatron/bridge/training/utils/train_utils.py, 0.2-0.6; shared
# docs/megatron-reference.md §5.1): "iteration {:8d}/{:8d} | ... | elapsed time per iteration (ms): {:.1f} |"
ITER_RE = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): ([0-9.]+)")
PRINT_STEP_MS = 0.1  # {:.1f}
SEARCH_GRID = (3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 200, 256, 320, 400)
MIXED = [  # (eager group, graph group): launch-bound eager against a quiet graph arm, as in real cells
    ("H200 medium eager (12 jobs)", "H200 medium graph (12 jobs)"),
    ("megatron eager (1 job)", "megatron te_attn (1 job)"),
]
EFFECT_GRID = (0.03, 0.05, 0.075, 0.10, 0.15, 0.20, 0.30, 0.40, 0.50, 0.70, 1.0)


@dataclass
class Group:
    name: str
    shapes: list[np.ndarray]  # per real run: steady iteration times / that run's median
    medians: np.ndarray  # per real run steady median (ms)
    sigma_job: float  # sd of log job level used in the simulation
    sigma_note: str  # where sigma_job comes from

    def __post_init__(self) -> None:
        # The group's typical step time: geometric mean of the job medians, so job levels (lognormal or
        # resampled real ones) average to 1 on the log scale and the simulated effect is the true one.
        self.base = float(np.exp(np.mean(np.log(self.medians))))


def load_runs(paths: list[str], first_allowed: int) -> tuple[list[np.ndarray], list[float]]:
    shapes, medians = [], []
    for p in sorted(paths):
        its, ms = [], []
        for line in open(p, errors="replace"):
            m = ITER_RE.search(line)
            if m:
                its.append(int(m[1]))
                ms.append(float(m[2]))
        w = steady_window(its, ms, first_allowed)
        if w.first is None:
            print(f"  skip {p}: {w.reason}", file=sys.stderr)
            continue
        x = np.array([t for i, t in zip(its, ms) if w.first <= i <= w.last])
        shapes.append(x / np.median(x))
        medians.append(float(np.median(x)))
    return shapes, medians


def observed_sigma(medians: list[float]) -> float:
    """sd of log medians across jobs, floored at the print resolution (0.1 ms rounding, sd step/sqrt(12))."""
    floor = PRINT_STEP_MS / math.sqrt(12) / float(np.median(medians))
    sd = float(np.std(np.log(medians), ddof=1)) if len(medians) > 1 else 0.0
    return max(sd, floor)


def default_groups(first_allowed: int) -> list[Group]:
    specs: list[tuple[str, str, str | None]] = [
        # (name, glob, borrow sigma from: None = own jobs)
        ("H200 medium eager (12 jobs)", str(H200_JOBS / "medium-eager-*.log"), None),
        ("H200 medium graph (12 jobs)", str(H200_JOBS / "medium-graph-*.log"), None),
        ("H200 large eager (12 jobs)", str(H200_JOBS / "large-eager-*.log"), None),
        ("probe medium eager (2 jobs)", str(FIXTURES / "h200-probe/medium-eager-*.log"), None),
        ("probe medium graph (2 jobs)", str(FIXTURES / "h200-probe/medium-graph-*.log"), None),
        ("megatron eager (1 job)", str(FIXTURES / "megatron-h200/eager.log"), "H200 medium eager (12 jobs)"),
        ("megatron te_attn (1 job)", str(FIXTURES / "megatron-h200/te_attn.log"), "H200 large eager (12 jobs)"),
        ("megatron local_full (1 job)", str(FIXTURES / "megatron-h200/local_full.log"), "H200 medium graph (12 jobs)"),
    ]
    groups: dict[str, Group] = {}
    for name, pattern, borrow in specs:
        paths = glob.glob(pattern)
        if not paths:
            print(f"  skip group {name!r}: no logs match {pattern}", file=sys.stderr)
            continue
        shapes, medians = load_runs(paths, first_allowed)
        if not shapes:
            continue
        if borrow and borrow in groups:
            sig, note = groups[borrow].sigma_job, f"borrowed: {borrow}"
        else:
            sig = observed_sigma(medians)
            note = f"observed, {len(medians)} jobs" + (" (print-step floor)" if sig > np.std(np.log(medians), ddof=1 if len(medians) > 1 else 0) + 1e-12 else "")
        groups[name] = Group(name, shapes, np.array(medians), sig, note)
    return list(groups.values())


def simulate_arm(g: Group, rng: np.random.Generator, z: np.ndarray, base: float, levels: str, tag: str) -> list[ArmRun]:
    """One arm's runs: z holds the standard-normal job level of each repeat (shared parts carry pairing)."""
    runs = []
    for r in range(z.size):
        shape = g.shapes[rng.integers(len(g.shapes))]
        if levels == "empirical" and len(g.medians) >= 8:
            level = float(g.medians[rng.integers(len(g.medians))]) / g.base
        else:
            level = math.exp(g.sigma_job * float(z[r]))
        x = shape[rng.integers(0, shape.size, shape.size)] * base * level
        x = np.maximum(np.round(x / PRINT_STEP_MS) * PRINT_STEP_MS, PRINT_STEP_MS)
        runs.append(ArmRun(f"{tag}{r}", "completed", x))
    return runs


@dataclass
class Scenario:
    """Eager arm drawn from `eager`, graph arm from `graph` (the same group for A/A), true ratio 1 + effect."""

    eager: Group
    graph: Group
    pair_share: float = 0.0  # share of the job-level variance common to both arms of a repeat (pairing)

    @property
    def name(self) -> str:
        return self.eager.name if self.graph is self.eager else f"{self.eager.name} -> {self.graph.name}"

    @property
    def sigma(self) -> float:  # per-arm equivalent spread, for the search's starting guess
        return math.sqrt(0.5 * (self.eager.sigma_job**2 + self.graph.sigma_job**2))


def rates(sc: Scenario, *, sims: int, repeats: int, effect: float, margin: float, levels: str, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts: dict[str, int] = {}
    rho = sc.pair_share
    for _ in range(sims):
        common = rng.standard_normal(repeats)
        ze = math.sqrt(rho) * common + math.sqrt(1 - rho) * rng.standard_normal(repeats)
        zg = math.sqrt(rho) * common + math.sqrt(1 - rho) * rng.standard_normal(repeats)
        e = simulate_arm(sc.eager, rng, ze, sc.eager.base, levels, "e")
        gr = simulate_arm(sc.graph, rng, zg, sc.eager.base / (1.0 + effect), levels, "g")
        v = judge_cell(e, gr, margin=margin, paired=rho > 0).verdict
        counts[v] = counts.get(v, 0) + 1
    return {k: c / sims for k, c in counts.items()}


def repeats_for_power(sc: Scenario, *, sims: int, effect: float, margin: float, levels: str, seed: int, target: float = 0.8) -> tuple[int | None, float]:
    # Start below the normal-approximation answer, 2 ((z_.975 + z_.8) sigma / distance)^2, so the
    # noisy groups do not walk the whole grid (the t quantiles only push the true answer up).
    dist = math.log(1 + effect) - math.log(1 + margin)
    guess = 2 * (2.8 * sc.sigma * math.sqrt(1 - sc.pair_share) / dist) ** 2 if dist > 0 else math.inf
    def power(n: int) -> float:
        return rates(sc, sims=sims, repeats=n, effect=effect, margin=margin, levels=levels, seed=seed + n).get("speedup", 0.0)

    start = next((i for i, n in enumerate(SEARCH_GRID) if n >= 0.7 * guess), len(SEARCH_GRID) - 1)
    last = 0.0
    for i in range(start, len(SEARCH_GRID)):
        last = power(SEARCH_GRID[i])
        if last >= target:
            # The guess assumes lognormal job levels; walk back down while smaller counts also reach the target.
            while i > 0 and i == start:
                lower = power(SEARCH_GRID[i - 1])
                if lower < target:
                    break
                i, start, last = i - 1, i - 1, lower
            return SEARCH_GRID[i], last
    return None, last


def effect_for_power(sc: Scenario, *, sims: int, repeats: int, margin: float, levels: str, seed: int, target: float = 0.8) -> float | None:
    """Smallest effect of EFFECT_GRID detected as speedup in >= target of cells at this many repeats."""
    for eff in EFFECT_GRID:
        if rates(sc, sims=sims, repeats=repeats, effect=eff, margin=margin, levels=levels, seed=seed).get("speedup", 0.0) >= target:
            return eff
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=1000, help="simulated cells per A/A and A/B figure (default 1000)")
    ap.add_argument("--search-sims", type=int, default=300, help="cells per step of the repeats-for-80%%-power search")
    ap.add_argument("--one-repeat-sims", type=int, default=300, help="cells for the 1-repeat (bootstrap) A/A figure")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--margin", type=float, default=0.02)
    ap.add_argument("--effect", type=float, default=0.05)
    ap.add_argument("--first-allowed", type=int, default=5, help="first steady iteration (warmup 3 + capture on 4)")
    ap.add_argument("--levels", choices=("normal", "empirical"), default="normal",
                    help="job level: lognormal with the observed sd, or resampled real job medians (groups with >= 8 jobs)")
    ap.add_argument("--group", action="append", default=[], metavar="NAME=GLOB",
                    help="add a group of real jobs of one configuration (its own spread is used)")
    ap.add_argument("--only", action="append", default=[], help="run only groups whose name contains this")
    ap.add_argument("--pair-share", type=float, default=0.0,
                    help="simulate pairing: share of job-level variance common to both arms of a repeat (judged with paired=True)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    a = ap.parse_args(argv)

    t0 = time.time()
    groups = default_groups(a.first_allowed)
    for spec in a.group:
        name, _, pattern = spec.partition("=")
        if not pattern:
            ap.error(f"--group {spec!r}: expected NAME=GLOB, e.g. 'cluster eager=/data/run-*/log.txt'")
        shapes, medians = load_runs(glob.glob(pattern), a.first_allowed)
        if not shapes:
            ap.error(f"--group {name!r}: no usable logs match {pattern!r}")
        groups.append(Group(name, shapes, np.array(medians), observed_sigma(medians), f"observed, {len(medians)} jobs"))
    if not 0 <= a.pair_share < 1:
        ap.error(f"--pair-share {a.pair_share}: expected a share in [0, 1), e.g. 0.5")
    if a.only:
        groups = [g for g in groups if any(s in g.name for s in a.only)]

    print(f"# judge_cell validation: {a.repeats} repeats per arm, margin {a.margin:g}, 95% interval, "
          f"effect {a.effect:.0%}, levels {a.levels}, {a.sims} cells per figure, seed {a.seed}"
          + (f", paired with {a.pair_share:.0%} of job variance shared" if a.pair_share else ", unpaired"))
    print()
    print("| group | step ms (geo. mean of jobs) | sigma_job (log sd) | sigma source | A/A false pos. (n=%d) | A/A neutral | A/A false pos. (n=1, within-run) | power 5%% (n=%d) | repeats for 80%% power | effect for 80%% power (n=%d) |"
          % (a.repeats, a.repeats, a.repeats))
    print("|---|---|---|---|---|---|---|---|---|---|")
    by_name = {g.name: g for g in groups}
    scenarios = [Scenario(g, g, a.pair_share) for g in groups]
    # Real A/B pairs of a noisy eager arm and a quiet graph arm (A/A does not apply to them).
    for e_name, g_name in MIXED:
        if e_name in by_name and g_name in by_name:
            scenarios.append(Scenario(by_name[e_name], by_name[g_name], a.pair_share))
    out = []
    for i, sc in enumerate(scenarios):
        seed = a.seed + 1000 * i
        g = sc.eager
        ab = rates(sc, sims=a.sims, repeats=a.repeats, effect=a.effect, margin=a.margin, levels=a.levels, seed=seed + 2)
        n80, p80 = repeats_for_power(sc, sims=a.search_sims, effect=a.effect, margin=a.margin, levels=a.levels, seed=seed + 3)
        mde = effect_for_power(sc, sims=a.search_sims, repeats=a.repeats, margin=a.margin, levels=a.levels, seed=seed + 4)
        power = ab.get("speedup", 0)
        need = f"{n80} ({p80:.0%})" if n80 else f"> {SEARCH_GRID[-1]} ({p80:.0%} at {SEARCH_GRID[-1]})"
        row = dict(group=sc.name, median_ms=g.base, sigma_job=sc.sigma, sigma_source=g.sigma_note, jobs=len(g.medians),
                   ab=ab, power=power, repeats_for_80=n80, power_at_that=p80, effect_for_80=mde)
        if sc.graph is sc.eager:
            aa = rates(sc, sims=a.sims, repeats=a.repeats, effect=0.0, margin=a.margin, levels=a.levels, seed=seed)
            aa1 = rates(sc, sims=a.one_repeat_sims, repeats=1, effect=0.0, margin=a.margin, levels=a.levels, seed=seed + 1)
            fp = aa.get("speedup", 0) + aa.get("slowdown", 0)
            fp1 = aa1.get("speedup", 0) + aa1.get("slowdown", 0)
            row.update(aa=aa, aa_one_repeat=aa1, false_positive_rate=fp, false_positive_rate_one_repeat=fp1)
            aa_cols = f"{fp:.1%} | {aa.get('neutral', 0):.0%} | {fp1:.0%}"
            sig, src = f"{g.sigma_job:.4f}", g.sigma_note
        else:
            aa_cols = "n/a | n/a | n/a"
            sig, src = f"{sc.eager.sigma_job:.4f} / {sc.graph.sigma_job:.4f}", "eager / graph groups"
        print(f"| {sc.name} | {g.base:.2f} | {sig} | {src} | {aa_cols} | {power:.1%} | {need} | "
              f"{f'{mde:.1%}' if mde else '> 100%'} |", flush=True)
        out.append(row)
    worst = max((r["false_positive_rate"] for r in out if "false_positive_rate" in r), default=math.nan)
    print()
    print(f"worst A/A false-positive rate at n={a.repeats}: {worst:.1%} (target <= 5%); "
          f"groups reaching 80% power at n={a.repeats}: {sum(r['power'] >= 0.8 for r in out)} of {len(out)}; "
          f"{time.time() - t0:.0f} s")
    if a.json:
        a.json.write_text(json.dumps(dict(settings=vars(a) | {"json": str(a.json)}, groups=out), indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
