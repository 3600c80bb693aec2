"""A sweep: the spec's shapes, variants, cells and runs, with stable ids.

A **shape** is one point of the cross product of `axes` (minus `exclude`, plus `include`); a **variant** is a graph
setting; a **cell** is shape x graph variant; a **run** is one job of one arm (eager, graph, or A/A control) for one
repeat. Ids are readable slugs plus a short hash of everything that changes what a run does, so editing a sweep
only adds runs and never renames finished ones.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from graphsweep.sweepspec.source import Source, source_of
from graphsweep.records import EAGER_VARIANT, Cell, DecideSpec, ExecutorSpec, RunSpec, SpecError, Variant
from graphsweep.vocab import AA, CONTROL, EAGER, GRAPH, PAIR, pair_run_id


def parse_variant(path: str | Path, index: int, v: Mapping[str, Any]) -> Variant:
    impl, scope = v["impl"], tuple(v.get("scope", ()))
    key = f"variants.{index}"
    if impl == "local":
        # Megatron Bridge 0.6 supports local only for full-iteration graphs (utils/cuda_graph.py
        # validate_cuda_graph_configuration); MCore 0.19 spells the same thing cuda_graph_impl=full_iteration.
        if scope != ("full_iteration",):
            raise SpecError(
                path,
                f"{key}.scope",
                list(scope),
                'impl "local" is supported only with scope [full_iteration] (Megatron Bridge 0.6); '
                'use impl "transformer_engine" for scoped graphs',
            )
        impl, scope = "full_iteration", ()
    elif impl == "full_iteration":
        if scope not in ((), ("full_iteration",)):
            raise SpecError(path, f"{key}.scope", list(scope), 'impl "full_iteration" takes no scope')
        scope = ()
    else:  # transformer_engine
        if not scope:
            raise SpecError(path, f"{key}.scope", [], 'impl "transformer_engine" needs a scope such as [attn]')
        if "full_iteration" in scope:
            raise SpecError(
                path,
                f"{key}.scope",
                list(scope),
                "full_iteration CUDA graph scope cannot use cuda_graph_impl=transformer_engine; use impl full_iteration",
            )
    name = v.get("name") or ("full_iteration" if impl == "full_iteration" else "+".join(scope))
    return Variant(name=name, impl=impl, scope=scope, overrides=dict(v.get("overrides", {})))


# Short names for readable ids; anything else uses its last dotted component.
_ABBREVIATIONS = {
    "hidden": "h",
    "hidden_size": "h",
    "layers": "l",
    "num_layers": "l",
    "heads": "nh",
    "num_attention_heads": "nh",
    "seq_length": "s",
    "micro_batch": "mb",
    "micro_batch_size": "mb",
    "global_batch_size": "gb",
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
    "expert_model_parallel_size": "ep",
    "mem_fraction": "memfrac",
    "recompute_granularity": "rc",
}


@dataclass(frozen=True)
class Spec:
    """A validated sweep spec: `raw` is the YAML with the schema's defaults filled in (sweepspec/load.py); the
    properties are its typed view, and the code reads them, never `raw`'s keys (whose defaults are the schema's)."""

    path: str
    raw: Mapping[str, Any]  # the whole spec, for what records or hashes all of it (plan.parquet, owner.json)
    # the decision loop's budget in repeats per arm as `graphsweep more-repeats` raised it for one results folder
    # (results/{sweep}/extra_repeats.yaml); None: the spec's decide.max_repeats
    raised_max_repeats: int | None = field(default=None, compare=False, hash=False)

    @property
    def name(self) -> str:
        return self.raw["sweep"]

    @property
    def axes(self) -> dict[str, list[Any]]:
        return dict(self.raw["axes"])

    @property
    def fixed(self) -> dict[str, Any]:
        return dict(self.raw.get("fixed", {}))

    @property
    def variants(self) -> list[Variant]:
        return [parse_variant(self.path, i, v) for i, v in enumerate(self.raw["variants"])]

    @property
    def workload(self) -> dict[str, Any]:
        return dict(self.raw["workload"])

    @property
    def executor(self) -> ExecutorSpec:
        return ExecutorSpec.of(self.raw["executor"])

    @property
    def pairing(self) -> bool:
        return bool(self.raw["pairing"])

    @property
    def repeats(self) -> int:
        return int(self.raw["repeats"])

    @property
    def warmup(self) -> int:
        return int(self.raw["warmup"])

    @property
    def iterations(self) -> int:
        return int(self.raw["iterations"])

    @property
    def margin(self) -> float:
        return self.raw["margin"]  # as written (an int stays one in a message)

    @property
    def budget_gpu_hours(self) -> float:
        return self.raw["budget_gpu_hours"]  # as written (an int stays one in a message)

    @property
    def max_runs(self) -> int:
        return int(self.raw["max_runs"])

    @property
    def decide(self) -> DecideSpec:
        """The decision loop's settings; its max_repeats as more-repeats raised it for this results folder."""
        d = DecideSpec.of(self.raw["decide"])
        if self.raised_max_repeats is not None and self.raised_max_repeats > d.max_repeats:
            d = replace(d, max_repeats=self.raised_max_repeats)
        return d

    @property
    def loops(self) -> bool:
        """Whether the decision loop runs: on (the default) for a sweep that submits its runs; an ingested sweep's
        logs exist already, so it is judged once on what it has."""
        return self.decide.enabled and not self.is_ingest

    @property
    def planned_repeats(self) -> int:
        """Repeats per arm every cell is planned to: the loop's budget (it submits only what its looks ask for), or the
        spec's repeats without the loop."""
        return max(self.repeats, self.decide.max_repeats) if self.loops else self.repeats

    @property
    def aa_control(self) -> bool:
        return bool(self.raw["aa_control"])

    @property
    def launch_gate(self) -> bool:
        return bool(self.raw["launch_gate"])

    @property
    def preflight(self) -> str:
        """rules, megatron or none (an ingest spec's default is none: its runs ran already)."""
        return str(self.raw["preflight"])

    @property
    def verify(self) -> bool:
        return bool(self.raw["verify"])

    @property
    def is_ingest(self) -> bool:
        """The runs are logs that exist (`source:`): nothing is submitted."""
        return "source" in self.raw

    @property
    def source(self) -> Source | None:
        """The `source:` block, its folder resolved against the spec's (None: the sweep submits its runs)."""
        return source_of(self.raw, self.path)

    def with_max_repeats(self, max_repeats: int | None) -> "Spec":
        """The same sweep with the loop's budget raised to `max_repeats` jobs per arm (only ever raised: a lower budget
        would orphan finished runs)."""
        return replace(self, raised_max_repeats=None if max_repeats is None else int(max_repeats))

    def shapes(self) -> list[dict[str, Any]]:
        """The cross product of the axes, in spec order, minus excluded shapes."""
        axes = self.axes
        shapes = [dict(zip(axes, values)) for values in itertools.product(*axes.values())]
        excludes = self.raw.get("exclude", [])
        kept = [s for s in shapes if not any(all(s.get(k) == v for k, v in ex.items()) for ex in excludes)]
        return kept + [dict(item) for item in self.raw.get("include", []) if dict(item) not in kept]

    def runs(self) -> list[RunSpec]:
        return expand(self)[0]

    def cells(self) -> list[Cell]:
        return expand(self)[1]


def _short_hash(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha1(blob).hexdigest()[:6]


def _slug_value(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9.]", "", str(value).lower())[:16] or "x"


def shape_slug(shape: Mapping[str, Any]) -> str:
    parts = []
    for key, value in shape.items():
        short = _ABBREVIATIONS.get(key) or _ABBREVIATIONS.get(key.rsplit(".", 1)[-1]) or key.rsplit(".", 1)[-1]
        # a run id becomes a folder name: an axis named `model.x/y` must not make runs/{run_id} two folders
        parts.append(f"{re.sub(r'[^A-Za-z0-9_+~-]', '', short)}{_slug_value(value)}")
    return "-".join(parts)[:60]


def shape_id(spec: Spec, shape: Mapping[str, Any]) -> str:
    ident = (
        spec.workload,
        spec.fixed,
        dict(shape),
        spec.warmup,
        spec.iterations,
    )
    return f"{shape_slug(shape)}-{_short_hash(*ident)}"


def _arm_name(variant: Variant) -> str:
    if variant.overrides:
        return f"{variant.name}-{_short_hash(variant.impl, variant.scope, dict(variant.overrides))[:4]}"
    return variant.name


def expand(spec: Spec) -> tuple[list[RunSpec], list[Cell]]:
    """All runs and cells of a sweep, in a stable order.

    Unpaired (default): per shape, the eager baseline runs `{shape_id}.eager.r{k}` shared by all variants, and per
    cell its graph runs `{cell_id}.r{k}`. Paired (`pairing: true`): per cell, pair jobs `{cell_id}.pair.r{k}`, each
    running both arms in ABBA order on the same GPUs; the pair is the unit, so no baseline is shared.
    Every cell is planned to spec.planned_repeats (the decision loop's budget: it submits the first `repeats` and
    then only what its looks ask for). Repeat indices only ever grow, so ids of finished runs never change.
    """
    variants = spec.variants
    has_full = any(v.is_full_iteration for v in variants)
    runs: list[RunSpec] = []
    cells: list[Cell] = []
    base = spec.planned_repeats
    for shape in spec.shapes():
        sid = shape_id(spec, shape)
        settings = {**spec.fixed, **shape}
        common = dict(
            sweep=spec.name,
            shape_id=sid,
            shape=shape,
            settings=settings,
            workload=spec.workload,
            warmup=spec.warmup,
            iterations=spec.iterations,
            gpus=int(settings.get("gpus", 1)),
            executor=spec.executor,
            has_full_iteration_variant=has_full,
            quiet=dict(spec.raw["quiet"]),
        )
        shape_cells = [(f"{sid}.{_arm_name(v)}", GRAPH, v) for v in variants]
        if spec.aa_control:
            shape_cells.append((f"{sid}.{AA}", CONTROL, Variant(AA, "none")))
        n_of = {cid: base for cid, _, _ in shape_cells}
        if spec.pairing:
            for cid, arm, variant in shape_cells:
                jobs = tuple(f"{cid}.pair.r{k}" for k in range(1, n_of[cid] + 1))
                for k, rid in enumerate(jobs, start=1):
                    runs.append(RunSpec(run_id=rid, cell_id=cid, arm=PAIR, variant=variant, repeat=k, **common))
                eager_ids = tuple(pair_run_id(j, EAGER) for j in jobs)
                other_ids = tuple(pair_run_id(j, arm) for j in jobs)
                cells.append(Cell(cid, sid, variant, shape, eager_ids, other_ids, arm == CONTROL, jobs))
            continue
        # the shared baseline has as many repeats as its most repeated cell
        eager_ids = tuple(f"{sid}.{EAGER}.r{k}" for k in range(1, max(n_of.values()) + 1))
        for k, rid in enumerate(eager_ids, start=1):
            runs.append(RunSpec(run_id=rid, cell_id=f"{sid}.{EAGER}", arm=EAGER, variant=EAGER_VARIANT, repeat=k,
                                **common))
        for cid, arm, variant in shape_cells:
            ids = tuple(f"{cid}.r{k}" for k in range(1, n_of[cid] + 1))
            for k, rid in enumerate(ids, start=1):
                runs.append(RunSpec(run_id=rid, cell_id=cid, arm=arm, variant=variant, repeat=k, **common))
            cells.append(Cell(cid, sid, variant, shape, eager_ids, ids, is_control=arm == CONTROL))
    return runs, cells


def runs_by_id(spec: Spec) -> dict[str, RunSpec]:
    return {r.run_id: r for r in spec.runs()}
