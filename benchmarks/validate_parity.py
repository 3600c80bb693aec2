"""Loss parity on real H200 runs: how often a correct graph arm is called another model, and what it catches.

For every real model in the repository (benchmarks/realjobs.py: the builtin GPT's shapes, the probe's shapes, the
tiny dense Megatron model on two hosts, the dropless MoE, the 1.2B dense model at seq 512 and 4096), with the
workflow's own parity code (graphsweep/judge/verdict.py arm_parity over ArmRun records):

1. **correct runs**: every graph arm of up to 4 real graph runs against up to 3 real eager runs of the same seed
   (all combinations, or `--resamples` random ones where there are more), no edit: the share called invalid
   (diverged or NaN) is the false-invalid rate; the eager runs' own spread and the tolerance it gives;
2. **injected faults** on those real graph runs (only `lm loss` values edited): NaN from an iteration, x1.05 from an
   iteration, x1.5 from an iteration, a +1 % and a +0.9 % bias on every iteration, a multiplicative random walk
   from an iteration, each in 1 of 4, 2 of 4 and 4 of 4 graph runs: the share flagged (not `ok`) and the share
   invalid;
3. **the smallest departure caught**: the smallest persistent factor (x(1 + b) from the middle of the run in every
   graph run) made invalid in at least 95 % of the arms, next to the model's tolerance.

    .venv/bin/python benchmarks/validate_parity.py              # the table docs/statistics.md quotes
    .venv/bin/python benchmarks/validate_parity.py --factor 1.5  # what another spread factor would do
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realjobs  # noqa: E402

from graphsweep.judge import parity as lp  # noqa: E402
from graphsweep.judge.verdict import ArmRun, arm_parity  # noqa: E402

Loss = dict[int, float]
GRAPH_RUNS, EAGER_RUNS = 4, 3
FAULT_FROM = 0.4  # faults start 40 % into the run's iterations (iteration 10 of 25)
BIASES = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0)


def model_of(job: realjobs.Job) -> str:
    """Runs of one model train the same network on the same data: one source and shape (the builtin's two sweeps
    are one model: same code, same seeds)."""
    return job.shape.replace("h200-builtin-sweep-a/", "h200-builtin/").replace("h200-dense-sweep-a/",
                                                                             "megatron-tiny-vanilla-gpt/")


def arm(runs: list[realjobs.Job], loss: Callable[[realjobs.Job, int], Loss] | None = None) -> list[ArmRun]:
    return [ArmRun(j.run_id, "completed", list(j.step_ms), j.print_step_ms, seed=j.seed,
                   loss=loss(j, k) if loss else j.losses) for k, j in enumerate(runs)]


def designs(eager: list[realjobs.Job], graph: list[realjobs.Job], n: int,
            rng: random.Random) -> list[tuple[list[realjobs.Job], list[realjobs.Job]]]:
    """(eager, graph) arms of up to EAGER_RUNS x GRAPH_RUNS runs of one seed: every combination, or n random ones."""
    ke, kg = min(EAGER_RUNS, len(eager)), min(GRAPH_RUNS, len(graph))
    es, gs = list(itertools.combinations(eager, ke)), list(itertools.combinations(graph, kg))
    pairs = [(list(e), list(g)) for e in es for g in gs]
    return pairs if len(pairs) <= n else [pairs[i] for i in sorted(rng.sample(range(len(pairs)), n))]


def fault(kind: str, start: int, rng: np.random.Generator) -> Callable[[Loss], Loss]:
    def apply(loss: Loss) -> Loss:
        its = sorted(loss)
        out = dict(loss)
        walk = np.exp(np.cumsum(rng.normal(0.0, 0.01, len(its))))
        for k, i in enumerate(its):
            if kind == "nan" and i >= start:
                out[i] = math.nan
            elif kind == "x1.05" and i >= start:
                out[i] = loss[i] * 1.05
            elif kind == "x1.5" and i >= start:
                out[i] = loss[i] * 1.5
            elif kind == "bias +1%":
                out[i] = loss[i] * 1.01
            elif kind == "bias +0.9%":
                out[i] = loss[i] * 1.009
            elif kind == "random walk" and i >= start:
                out[i] = loss[i] * walk[k] / walk[its.index(start)] if start in loss else loss[i]
        return out
    return apply


FAULTS = ("nan", "x1.05", "x1.5", "bias +1%", "bias +0.9%", "random walk")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--resamples", type=int, default=60, help="arms per model where there are more combinations")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--floor", type=float, default=lp.LOSS_FLOOR)
    p.add_argument("--factor", type=float, default=lp.SPREAD_FACTOR)
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    rng, nrng = random.Random(a.seed), np.random.default_rng(a.seed)

    groups: dict[tuple[str, int | None], list[realjobs.Job]] = {}
    for j in realjobs.pool():
        if j.loss and j.seed is not None and (j.arm == realjobs.EAGER or j.usable):
            groups.setdefault((model_of(j), j.seed), []).append(j)
    # one seed per model and design (a builtin shape has one eager run per seed: its graph runs of that seed)
    models: dict[str, list[tuple[list[realjobs.Job], list[realjobs.Job]]]] = {}
    info: dict[str, dict[str, float]] = {}
    for (model, seed), js in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        eager = [j for j in js if j.arm == realjobs.EAGER]
        graph = [j for j in js if j.arm == realjobs.GRAPH]
        if not eager or not graph:
            continue
        # the same run seen twice (the builtin's two sweeps share seeds): keep distinct trajectories per host only
        models.setdefault(model, []).extend(designs(eager, graph, a.resamples, rng))
        d = info.setdefault(model, {"eager": 0, "graph": 0, "spread": 0.0, "worst": 0.0})
        d["eager"] += len(eager)
        d["graph"] += len(graph)
        d["spread"] = max(d["spread"], lp.eager_spread([e.losses for e in eager]))
        d["worst"] = max(d["worst"], max(min(lp.persistent_level(g.losses, e.losses) for e in eager) for g in graph))

    def judge(e: list[realjobs.Job], g: list[ArmRun]) -> str:
        res = arm_parity(arm(e), g, floor=a.floor, factor=a.factor)
        return lp.UNCHECKED if res is None else res.state

    print(f"# Loss parity on real H200 runs (floor {a.floor:g}, spread factor {a.factor:g}, drift: at most "
          f"{lp.DRIFT_MAX_RUNS} of >= {lp.DRIFT_MIN_CHECKED} runs within {lp.DRIFT_LEVEL:g} tolerances; tail >= "
          f"{lp.MIN_TAIL} iterations; seed {a.seed}, up to {a.resamples} arms per model)\n")
    print("## 1. Correct graph runs, no edit\n")
    print("| model | eager runs | graph runs | arms | eager spread | worst graph level | tolerance | invalid | flagged |")
    print("|---|---|---|---|---|---|---|---|---|")
    total_invalid = total_arms = 0
    for model, ds in models.items():
        states = [judge(e, arm(g)) for e, g in ds]
        invalid = sum(s in (lp.DIVERGED, lp.NONFINITE) for s in states)
        flagged = sum(s != lp.PARITY_OK for s in states)
        total_invalid += invalid
        total_arms += len(ds)
        d = info[model]
        tol = lp.tolerance_for(d["spread"], a.floor, a.factor)
        print(f"| {model} | {d['eager']} | {d['graph']} | {len(ds)} | {d['spread']:.1e} | {d['worst']:.1e} | "
              f"{tol:.1e} | {invalid}/{len(ds)} | {flagged}/{len(ds)} |")
    print(f"\nFalse-invalid arms over all models: {total_invalid} of {total_arms}.\n")

    print("## 2. Injected faults (only lm loss edited): flagged (not ok) / invalid, share of arms\n")
    shares = ((1, "1 of 4"), (2, "2 of 4"), (4, "4 of 4"))
    print("| model | fault | " + " | ".join(n for _, n in shares) + " |")
    print("|---|---|" + "---|" * len(shares))
    for model, ds in models.items():
        for kind in FAULTS:
            cells = []
            for k, _ in shares:
                flagged = invalid = n = 0
                for e, g in ds:
                    if len(g) < GRAPH_RUNS:
                        continue
                    its = sorted(g[0].losses)
                    start = its[int(len(its) * FAULT_FROM)]
                    f = fault(kind, start, nrng)
                    runs = arm(g, lambda j, i: f(j.losses) if i < k else j.losses)
                    s = judge(e, runs)
                    n += 1
                    flagged += s != lp.PARITY_OK
                    invalid += s in (lp.DIVERGED, lp.NONFINITE)
                cells.append("n/a" if not n else f"{flagged / n:.0%} / {invalid / n:.0%}")
            print(f"| {model} | {kind} | " + " | ".join(cells) + " |")

    print("\n## 3. The smallest persistent departure caught (every graph run x(1 + b) from 40 % of the run)\n")
    print("| model | tolerance | smallest b invalid in >= 95 % of arms |")
    print("|---|---|---|")
    for model, ds in models.items():
        tol = lp.tolerance_for(info[model]["spread"], a.floor, a.factor)
        found = None
        for b in BIASES:
            hits = n = 0
            for e, g in ds:
                its = sorted(g[0].losses)
                start = its[int(len(its) * FAULT_FROM)]
                runs = arm(g, lambda j, i: {it: (x * (1 + b) if it >= start else x) for it, x in j.losses.items()})
                n += 1
                hits += judge(e, runs) in (lp.DIVERGED, lp.NONFINITE)
            if n and hits >= 0.95 * n:
                found = b
                break
        print(f"| {model} | {tol:.1e} | {'> 2' if found is None else f'{found:g}'} |")
    print("\n## 4. Another model: eager runs of another seed (other init, other data) relabeled as the same seed\n")
    print("| model | pairs | persistent level (min - max) | caught (invalid) |")
    print("|---|---|---|---|")
    eager_by: dict[str, dict[int, realjobs.Job]] = {}
    for (model, seed), js in groups.items():
        for j in js:
            if j.arm == realjobs.EAGER:
                eager_by.setdefault(model, {}).setdefault(seed, j)
    for model, by_seed in sorted(eager_by.items()):
        if len(by_seed) < 2:
            continue
        levels, caught = [], 0
        for x, y in itertools.combinations(sorted(by_seed), 2):
            e, g = by_seed[x], by_seed[y]
            levels.append(lp.persistent_level(g.losses, e.losses))
            relabeled = [ArmRun(g.run_id, "completed", list(g.step_ms), g.print_step_ms, seed=e.seed, loss=g.losses)]
            caught += judge([e], relabeled) in (lp.DIVERGED, lp.NONFINITE)
        print(f"| {model} | {len(levels)} | {min(levels):.1e} - {max(levels):.1e} | {caught}/{len(levels)} |")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
