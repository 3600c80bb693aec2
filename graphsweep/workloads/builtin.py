"""The builtin workload, controller side: the settings of the small GPT in graphsweep/entry/builtin_gpt.py, their
checks, the command of a run and its cost. No torch here: the controller never imports it."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Mapping

from graphsweep.constraints.runtime import NO_CUDA
from graphsweep.entry.builtin_settings import REQUIRED, SCOPES, SETTINGS, TRAINER, setting_problem, shape_problem
from graphsweep.entry.affinity import ENV as PIN_CPUS_ENV
from graphsweep.workloads.base import RunCost
from graphsweep.workloads.megatron_bridge import MANUAL_GC_INTERVAL
from graphsweep.records import GraphOverrides, LaunchPlan, RunSpec, SpecError, Variant, Violation
from graphsweep.vocab import EAGER, PYTHON

KIND = "builtin"
# The builtin trainer's runs on the H200s (results/examples/h200-builtin, benchmarks/data/h200-builtin-sweep-a):
# `python benchmarks/estimates.py` prints these figures; the loop's seconds per iteration stand for every shape.
COST = RunCost(startup_s=7.9, teardown_s=1.1, capture_s=0.0, step_s=0.034)


def _sections(raw: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = [("axes", raw["axes"]), ("fixed", raw.get("fixed", {}))]
    out += [(f"include.{i}", item) for i, item in enumerate(raw.get("include", []))]
    return out


def validate(raw: Mapping[str, Any], path: str | Path) -> None:
    """Every setting known, of its type and range, per value; heads divide hidden in every shape."""
    for section, mapping in _sections(raw):
        for key in mapping:
            if key not in SETTINGS:
                raise SpecError(path, f"{section}.{key}", mapping[key],
                                f"the builtin workload has no setting '{key}'; known: {', '.join(sorted(SETTINGS))}")
    missing = [k for k in REQUIRED if k not in raw["axes"] and k not in raw.get("fixed", {})]
    if missing:
        raise SpecError(path, "fixed", raw.get("fixed", {}),
                        f"the builtin workload needs {', '.join(missing)} (in axes or fixed)")
    for i, v in enumerate(raw["variants"]):
        bad = set(v.get("scope", ())) - set(SCOPES) - {"full_iteration"}
        if bad:
            raise SpecError(path, f"variants.{i}.scope", v.get("scope"),
                            f"the builtin workload graphs only {list(SCOPES)}")
    for section, mapping in _sections(raw):
        for key, values in mapping.items():
            for value in (values if section == "axes" else [values]):
                if problem := setting_problem(key, value):
                    raise SpecError(path, f"{section}.{key}", value, problem)
    fixed = raw.get("fixed", {})
    for where, shape in _shapes(raw):
        if problem := shape_problem({**fixed, **shape}):
            section = where if "heads" in shape and where != "axes" else ("axes" if "heads" in raw["axes"] else "fixed")
            raise SpecError(path, f"{section}.heads", {**fixed, **shape}.get("heads"), problem)


def _shapes(raw: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where it comes from, shape) for every shape the spec runs: the axes' cross product minus excludes, includes."""
    keys = list(raw["axes"])
    excludes = raw.get("exclude", [])
    crossed = [dict(zip(keys, combo)) for combo in itertools.product(*(raw["axes"][k] for k in keys))]
    kept = [("axes", s) for s in crossed if not any(all(s.get(k) == v for k, v in ex.items()) for ex in excludes)]
    return kept + [(f"include.{i}", dict(item)) for i, item in enumerate(raw.get("include", []))]


def preflight(run: RunSpec) -> list[Violation]:
    return []  # the trainer itself says when it cannot run a graph where it runs (no CUDA: blocked, exit 3)


def needs_cuda(run: RunSpec) -> bool:
    """A graph arm (or a pair job with one) cannot run without a CUDA device; the eager arm trains on the CPU."""
    return run.variant.is_graph


def launch_plan(run: RunSpec) -> LaunchPlan:
    s = run.settings
    # the spec's workload.python (schema default `python`: the job's own interpreter, vocab.PYTHON), never this
    # process's path: a plan that names the controller's venv changes, and re-queues every run, when the venv moves
    argv = [str(run.workload.get("python") or PYTHON), "-m", TRAINER]
    for key in REQUIRED:
        argv += [f"--{key.replace('_', '-')}", str(s[key])]
    argv += ["--warmup", str(run.warmup), "--iters", str(run.total_iterations), "--seed", str(run.repeat)]
    for key in ("vocab", "dtype", "mem_fraction"):
        if key in s:
            argv += [f"--{key.replace('_', '-')}", str(s[key])]
    if run.quiet.get("manual_gc"):  # spec quiet.manual_gc: as the Megatron workload (MANUAL_GC_INTERVAL there)
        argv += ["--manual-gc", str(MANUAL_GC_INTERVAL)]
    argv += _variant_flags(run.variant)
    env = {str(k): str(val) for k, val in run.workload.get("env", {}).items()}
    if run.quiet.get("pin_cpus"):
        env.setdefault(PIN_CPUS_ENV, "1")
    return LaunchPlan(argv=argv, env=env, gpus=1, nodes=1, gpus_per_node=1, seed=run.repeat)


def _variant_flags(v: Variant) -> list[str]:
    """The trainer's graph switch: the only flags in which a graph run's command differs from eager's."""
    if not v.is_graph:
        return ["--variant", EAGER]
    if v.is_full_iteration:
        return ["--variant", "full_iteration"]
    return ["--variant", "scoped", "--scope", ",".join(v.scope)]


def graph_switch(run: RunSpec) -> GraphOverrides | None:
    """The trainer flags a graph run adds to eager's command (every other flag is the shape's and the repeat's)."""
    return GraphOverrides("trainer flags", tuple(_variant_flags(run.variant))) if run.variant.is_graph else None


def estimate(run: RunSpec) -> float:
    """GPU-seconds of one run: GPUs x the wall time of a run of its iterations (COST)."""
    return run.gpus * COST.seconds(run.total_iterations, run.variant.is_graph)
