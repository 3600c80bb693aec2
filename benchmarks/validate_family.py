"""Many variants, one baseline: how often a sweep prints a false speedup/slowdown, resampled from real H200 jobs.

Every variant of a shape is judged against the same eager runs, so an unlucky baseline draw moves every cell of
the shape at once. This resamples the real jobs of benchmarks/realjobs.py into whole sweeps and judges each one
with the workflow's own code: `graphsweep.judge.verdict.judge_cell` per cell, then
`graphsweep.judge.compare.family_gate` on the sweep's comparison frame (the Benjamini-Hochberg gate).

Null sweeps (the family-wise error). From ONE configuration with N jobs, each draw is a random permutation: its
first b jobs are the shared eager baseline and the next k blocks of b jobs are k "variants" (the spec's `repeats`
is b for every arm), every job used once. All arms are the same configuration, so no variant has an effect and
any speedup, slowdown or unverified (a speedup whose parity is unchecked, printed as "faster") is false. A sweep
of k variants takes the first k blocks of the same permutation, so one draw serves every k it fits (b(k+1) <= N).

Real effects (the gate's cost). An eager and a full_iteration configuration of one shape: a baseline of b eager
jobs against k variants, either all k of them b full_iteration jobs each ("all real"), or one of them a
full_iteration variant and k - 1 null variants of b more eager jobs ("1 real + nulls"). Truth: the verdict of
all jobs of both configurations. Detection: the share of the real cells that read it.

`Holm` is a candidate for comparison only (the adjusted p of Holm's step-down on the same p_beyond); the shipped
rule is the gate. Loss parity is left out by default (the runs carry no loss), so the judge's speedups read
`unverified`; the gate treats both alike. `--with-loss` feeds each job's real `lm loss` and seed (parity as the
workflow runs it; about 2.5x the time per cell).

    .venv/bin/python benchmarks/validate_family.py             # the tables of docs/statistics.md (5 min of CPU)
    .venv/bin/python benchmarks/validate_family.py --detail    # per configuration: benchmarks/data/validate_family.md
    .venv/bin/python benchmarks/validate_family.py --with-loss --baselines 3 --draws 200 --no-power   # 1 min of CPU
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
import realjobs  # noqa: E402

from graphsweep.judge import interval as iv  # noqa: E402
from graphsweep.judge.compare import GATED_VERDICTS, family_gate  # noqa: E402
from graphsweep.judge.verdict import ArmRun, judge_cell  # noqa: E402
from graphsweep.vocab import EAGER, INCONCLUSIVE, SPEEDUP, TIMING_VERDICTS, UNVERIFIED  # noqa: E402

KS = (1, 2, 3, 4, 6)  # null variants per sweep
BASELINES = (2, 3, 4, 5)  # jobs per arm (eager baseline and every variant)
POWER_BASELINES = (2, 3, 4)
MIN_JOBS = 12  # configurations with fewer jobs fit no design beyond k = 1 at b = 3
FALSE = set(GATED_VERDICTS)  # the claims of a difference: false in a null sweep


def arm(jobs: list[realjobs.Job], with_loss: bool) -> list[ArmRun]:
    return [ArmRun(j.run_id, j.outcome, j.step_ms, resolution_ms=j.print_step_ms,
                   seed=j.seed if with_loss else None, loss=j.losses if with_loss else {}) for j in jobs]


def judge(eager: list[realjobs.Job], graph: list[realjobs.Job], name: str, a: argparse.Namespace) -> dict:
    """One cell as the workflow's compare writes it (judge_cell's record + the columns family_gate reads)."""
    v = judge_cell(arm(eager, a.with_loss), arm(graph, a.with_loss), margin=a.margin, alpha=a.alpha)
    return {**asdict(v), "cell_id": name, "variant": name, "shape_id": "s", "family_gated": False}


def gate(rows: list[dict]) -> list[str]:
    """The verdicts after the family gate. The gate only demotes a decided cell to inconclusive, so a sweep without
    one is returned as it is (saves the frame; tests/judge/test_family.py checks that the gate never adds a verdict)."""
    if not any(r["verdict"] in FALSE for r in rows):
        return [r["verdict"] for r in rows]
    return list(family_gate(pd.DataFrame([dict(r) for r in rows])).verdict)


def holm(rows: list[dict], alpha: float) -> list[str]:
    """Candidate rule for comparison: a decided cell keeps its verdict when Holm's adjusted p is below alpha."""
    p = [r["p_beyond"] for r in rows if r["p_beyond"] is not None]
    m, order = len(p), np.argsort(p)
    adj, running = {}, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adj[i] = running
    out, k = [], 0
    for r in rows:
        q = None
        if r["p_beyond"] is not None:
            q, k = adj[k], k + 1
        out.append(r["verdict"] if r["verdict"] not in FALSE or (q is not None and q < alpha) else INCONCLUSIVE)
    return out


# ------------------------------------------------------------------------------------------------------------
# Null sweeps


@dataclass
class NullTally:
    sweeps: int = 0
    any_cell: int = 0  # sweeps printing >= 1 false verdict, per-cell rule alone
    any_gate: int = 0  # ... after family_gate
    any_holm: int = 0
    false_cell: int = 0  # false verdicts, summed over sweeps
    false_gate: int = 0
    single: int = 0  # false verdicts of the first variant alone (the per-cell rate at this b)
    untimed: int = 0  # cells without a timing verdict (with --with-loss: a null variant parity called invalid)

    def rate(self, x: int) -> float:
        return x / self.sweeps if self.sweeps else math.nan


def null_config(jobs: list[realjobs.Job], b: int, draws: int, rng: np.random.Generator,
                a: argparse.Namespace) -> dict[int, NullTally]:
    n = len(jobs)
    ks = [k for k in KS if b * (k + 1) <= n]
    out = {k: NullTally() for k in ks}
    if not ks:
        return out
    for _ in range(draws):
        p = rng.permutation(n)
        base = [jobs[i] for i in p[:b]]
        rows = [judge(base, [jobs[i] for i in p[b + v * b: b + (v + 1) * b]], f"null{v}", a) for v in range(max(ks))]
        first = int(rows[0]["verdict"] in FALSE)
        for k in ks:
            t, mine = out[k], rows[:k]
            cell = sum(r["verdict"] in FALSE for r in mine)
            gated = sum(v in FALSE for v in gate(mine))
            t.sweeps += 1
            t.single += first
            t.any_cell += cell > 0
            t.any_gate += gated > 0
            t.any_holm += any(v in FALSE for v in holm(mine, a.alpha))
            t.false_cell += cell
            t.false_gate += gated
            t.untimed += sum(r["verdict"] not in TIMING_VERDICTS for r in mine)
    return out


# ------------------------------------------------------------------------------------------------------------
# Real effects


@dataclass
class PowerTally:
    real: int = 0  # real cells judged
    hit_cell: int = 0  # ... that read the truth's verdict, per-cell rule
    hit_gate: int = 0
    hit_holm: int = 0
    sweeps: int = 0
    null_any_cell: int = 0  # "1 real + nulls": sweeps with a false verdict among the nulls
    null_any_gate: int = 0
    null_any_holm: int = 0
    fdp_cell: float = 0.0  # false / decided, summed over sweeps (its mean is the false discovery rate)
    fdp_gate: float = 0.0
    fdp_holm: float = 0.0

    def share(self, x: int, of: int) -> float:
        return x / of if of else math.nan


def hit(verdict: str, truth: str) -> bool:
    return verdict == truth or (truth in (SPEEDUP, UNVERIFIED) and verdict in (SPEEDUP, UNVERIFIED))


def power_pair(eager: list[realjobs.Job], graph: list[realjobs.Job], truth: str, b: int, scenario: str, draws: int,
               rng: np.random.Generator, a: argparse.Namespace) -> dict[int, PowerTally]:
    ne, ng = len(eager), len(graph)
    kmax = ng // b if scenario == "all real" else ne // b  # baseline + k - 1 nulls from the eager jobs
    ks = [k for k in range(1, 7) if k <= kmax]
    out = {k: PowerTally() for k in ks}
    for _ in range(draws):
        pe, pg = rng.permutation(ne), rng.permutation(ng)
        base = [eager[i] for i in pe[:b]]
        if scenario == "all real":
            rows = [judge(base, [graph[i] for i in pg[v * b:(v + 1) * b]], f"real{v}", a) for v in range(max(ks))]
            real = [True] * len(rows)
        else:
            rows = [judge(base, [graph[i] for i in pg[:b]], "real0", a)]
            rows += [judge(base, [eager[i] for i in pe[v * b:(v + 1) * b]], f"null{v}", a) for v in range(1, max(ks))]
            real = [True] + [False] * (len(rows) - 1)
        for k in ks:
            t, mine, is_real = out[k], rows[:k], real[:k]
            g, h = gate(mine), holm(mine, a.alpha)
            t.sweeps += 1
            for r, vg, vh, rl in zip(mine, g, h, is_real):
                if rl:
                    t.real += 1
                    t.hit_cell += hit(r["verdict"], truth)
                    t.hit_gate += hit(vg, truth)
                    t.hit_holm += hit(vh, truth)
            nulls = [(r["verdict"], vg, vh) for r, vg, vh, rl in zip(mine, g, h, is_real) if not rl]
            t.null_any_cell += any(v[0] in FALSE for v in nulls)
            t.null_any_gate += any(v[1] in FALSE for v in nulls)
            t.null_any_holm += any(v[2] in FALSE for v in nulls)
            for x, vs in (("fdp_cell", [r["verdict"] for r in mine]), ("fdp_gate", g), ("fdp_holm", h)):
                decided = [v in FALSE for v in vs]
                false = [d and not (rl and hit(v, truth)) for d, v, rl in zip(decided, vs, is_real)]
                setattr(t, x, getattr(t, x) + (sum(false) / sum(decided) if any(decided) else 0.0))
    return out


# ------------------------------------------------------------------------------------------------------------


def pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.1f}%"


def power_row(head: str, ts: list[PowerTally], mixed: bool) -> str:
    """Means over pairs: detection per rule; for 1 real + nulls the nulls' family-wise false verdicts; the FDR."""
    mean = lambda f: float(np.mean([f(t) for t in ts]))  # noqa: E731
    dc, dg = mean(lambda t: t.share(t.hit_cell, t.real)), mean(lambda t: t.share(t.hit_gate, t.real))
    dh = mean(lambda t: t.share(t.hit_holm, t.real))
    three = lambda xs: " -> ".join(pct(mean(lambda t, x=x: t.share(getattr(t, x), t.sweeps))) for x in xs)  # noqa: E731
    fw = three(("null_any_cell", "null_any_gate", "null_any_holm")) if mixed else "-"
    fdr = three(("fdp_cell", "fdp_gate", "fdp_holm"))
    return f"| {head} | {pct(dc)} | {pct(dg)} | {pct(dc - dg)} | {pct(dh)} | {fw} | {fdr} |"


def _null_task(task: tuple) -> tuple:
    c, b, a = task
    rng = np.random.default_rng([a.seed, b, zlib.crc32(c.encode())])
    return c, b, null_config(realjobs.configs()[c], b, a.draws, rng, a)


def _power_task(task: tuple) -> tuple:
    ce, cg, truth, b, scenario, a = task
    rng = np.random.default_rng([a.seed, b, zlib.crc32((cg + scenario).encode())])
    return cg, b, scenario, power_pair(realjobs.configs()[ce], realjobs.configs()[cg], truth, b, scenario,
                                       a.power_draws, rng, a)


def _run(fn, tasks: list, jobs: int) -> list:
    if jobs <= 1:
        return [fn(t) for t in tasks]
    # fork: the workers inherit the pool main() parsed (realjobs caches it)
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as ex:
        return list(ex.map(fn, tasks))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=2000, help="null sweeps per configuration and baseline size")
    ap.add_argument("--power-draws", type=int, default=200, help="sweeps per eager/graph pair, baseline, scenario")
    ap.add_argument("--baselines", default=",".join(map(str, BASELINES)), help="jobs per arm, comma-separated")
    ap.add_argument("--margin", type=float, default=iv.MARGIN)
    ap.add_argument("--alpha", type=float, default=iv.ALPHA)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--with-loss", action="store_true", help="feed each job's lm loss and seed (parity runs too)")
    ap.add_argument("--detail", action="store_true", help="per-configuration rows")
    ap.add_argument("--no-power", action="store_true", help="null sweeps only")
    a = ap.parse_args(argv)
    baselines = [int(x) for x in a.baselines.split(",")]

    t0 = time.time()
    configs = {c: js for c, js in realjobs.configs().items() if len(js) >= MIN_JOBS}
    print(f"# graphsweep.judge.verdict.judge_cell + graphsweep.judge.compare.family_gate; margin {a.margin:g}, "
          f"alpha {a.alpha:g}, loss parity {'on' if a.with_loss else 'off'}, seed {a.seed}; {a.draws} null sweeps per "
          f"configuration and baseline size, jobs drawn without replacement; {len(configs)} configurations with "
          f">= {MIN_JOBS} real H200 jobs ({', '.join(f'{c} {len(j)}' for c, j in configs.items())})")
    print()
    null: dict[tuple[int, int], dict[str, NullTally]] = {}
    for c, b, tallies in _run(_null_task, [(c, b, a) for b in baselines for c in configs], a.jobs):
        for k, t in tallies.items():
            null.setdefault((b, k), {})[c] = t
    print("| design: b jobs per arm, k null variants | configs | sweeps | any false verdict, per-cell rule (worst "
          "config) | any false verdict, BH gate (worst config) | Holm (worst) | if the cells were independent "
          "| false verdicts per sweep, per-cell -> gate |")
    print("|---|---|---|---|---|---|---|---|")
    worst_gate = (0.0, "")
    for (b, k), by in sorted(null.items()):
        ts = list(by.values())
        cell = [t.rate(t.any_cell) for t in ts]
        gt = [t.rate(t.any_gate) for t in ts]
        hm = [t.rate(t.any_holm) for t in ts]
        indep = [1 - (1 - t.rate(t.single)) ** k for t in ts]
        e_cell = np.mean([t.rate(t.false_cell) for t in ts])
        e_gate = np.mean([t.rate(t.false_gate) for t in ts])
        worst_gate = max(worst_gate, (max(gt), f"b={b}, k={k}"))
        print(f"| b={b}, k={k} | {len(ts)} | {sum(t.sweeps for t in ts)} | {pct(np.mean(cell))} ({pct(max(cell))}) "
              f"| {pct(np.mean(gt))} ({pct(max(gt))}) | {pct(np.mean(hm))} ({pct(max(hm))}) | {pct(np.mean(indep))} "
              f"| {e_cell:.3f} -> {e_gate:.3f} |", flush=True)
        if a.detail:
            for c, t in by.items():
                print(f"|   {c} | | {t.sweeps} | {pct(t.rate(t.any_cell))} | {pct(t.rate(t.any_gate))} "
                      f"| {pct(t.rate(t.any_holm))} | {pct(1 - (1 - t.rate(t.single)) ** k)} "
                      f"| {t.rate(t.false_cell):.3f} -> {t.rate(t.false_gate):.3f} |")
    se = math.sqrt(a.alpha * (1 - a.alpha) / a.draws)
    untimed = sum(t.untimed for by in null.values() for t in by.values())
    cells = sum(t.sweeps * k for (_, k), by in null.items() for t in by.values())
    print()
    print(f"null cells without a timing verdict (so outside the family): {untimed} of {cells}")
    print(f"worst configuration's family-wise rate with the gate: {pct(worst_gate[0])} at {worst_gate[1]} (alpha "
          f"{a.alpha:g}; one configuration's resampling error at {a.draws} sweeps: +-{pct(se)} at a rate of alpha); "
          f"{time.time() - t0:.0f} s")
    if a.no_power:
        return 0

    t1 = time.time()
    eager_of = {js[0].shape: c for c, js in configs.items() if js[0].arm == EAGER}
    pairs = [(eager_of[js[0].shape], c) for c, js in configs.items() if js[0].arm != EAGER and js[0].shape in eager_of]
    truths = {cg: judge(configs[ce], configs[cg], "all", a) for ce, cg in pairs}
    print()
    print(f"Real effects: {len(pairs)} eager/full_iteration pairs (all-jobs verdicts: "
          + "; ".join(f"{c} {t['verdict']} {t['speedup']:.3f}x" for c, t in truths.items())
          + f"); {a.power_draws} sweeps per pair, baseline size and scenario; detection = real cells reading the "
          f"all-jobs verdict (mean over pairs); FDR = mean share of false verdicts among the decided cells")
    print()
    print("| scenario | b | k | pairs | detection, per-cell rule | BH gate | lost to the gate | Holm "
          "| any false verdict among the nulls, per-cell -> gate -> Holm | FDR, per-cell -> gate -> Holm |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    tasks = [(ce, cg, truths[cg]["verdict"], b, scenario, a) for scenario in ("all real", "1 real + nulls")
             for b in POWER_BASELINES if b in baselines for ce, cg in pairs if truths[cg]["verdict"] in FALSE]
    power: dict[tuple[str, int, int], list[tuple[str, PowerTally]]] = {}
    for cg, b, scenario, tallies in _run(_power_task, tasks, a.jobs):
        for k, t in tallies.items():
            power.setdefault((scenario, b, k), []).append((cg, t))
    for (scenario, b, k), named in sorted(power.items(), key=lambda kv: (kv[0][0] != "all real", kv[0][1:])):
        mixed = scenario != "all real"
        if mixed and k == 1:
            continue  # the same sweep as "all real", k = 1
        print(power_row(f"{scenario} | {b} | {k} | {len(named)}", [t for _, t in named], mixed), flush=True)
        if a.detail:
            for cg, t in named:
                print(power_row(f"  {cg} | | | ", [t], mixed))
    print()
    print(f"real effects: {time.time() - t1:.0f} s; total {time.time() - t0:.0f} s ({a.jobs} processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
