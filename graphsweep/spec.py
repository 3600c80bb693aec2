"""The sweep spec: load, validate, expand into shapes, cells and runs.

A **shape** is one point of the cross product of `axes` (minus `exclude`); a **variant** is a graph setting;
a **cell** is shape x graph variant; a **run** is one job of one arm (eager, graph, or A/A control) for one repeat.
Ids are readable slugs plus a short hash of everything that changes what a run does, so editing a sweep only
adds runs and never renames finished ones.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "configs" / "schema" / "sweep.schema.yaml"

# Settings the builtin workload understands (graphsweep/workload.py flags).
BUILTIN_SETTINGS = {"hidden", "layers", "heads", "seq_length", "micro_batch", "vocab", "mem_fraction", "dtype"}
BUILTIN_REQUIRED = {"hidden", "layers", "heads", "seq_length", "micro_batch"}
BUILTIN_SCOPES = {"attn", "mlp"}
TE_SCOPES = {"attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"}

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


class SpecError(ValueError):
    """A sweep spec is invalid. The message names the file, the key and the value."""

    def __init__(self, path: str | Path, key: str, value: Any, problem: str):
        self.path, self.key, self.value, self.problem = str(path), key, value, problem
        shown = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        super().__init__(f"{path}: key '{key}' = {shown}: {problem}")


@dataclass(frozen=True)
class Variant:
    """A graph setting. impl is 'none' for eager, else local | transformer_engine | full_iteration."""

    name: str
    impl: str
    scope: tuple[str, ...] = ()
    overrides: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_graph(self) -> bool:
        return self.impl != "none"

    @property
    def is_full_iteration(self) -> bool:
        return self.impl == "full_iteration"


EAGER = Variant("eager", "none")


@dataclass(frozen=True)
class RunSpec:
    """One job: one arm of one shape for one repeat."""

    sweep: str
    run_id: str
    shape_id: str
    cell_id: str  # graph run: its cell; eager run: "<shape_id>.eager" (it serves every cell of the shape)
    arm: str  # eager | graph | control | pair (one job running both arms of a cell in ABBA order, graphsweep/abba.py)
    variant: Variant
    repeat: int
    shape: Mapping[str, Any]  # axis -> value (what varies)
    settings: Mapping[str, Any]  # fixed + shape (what the workload gets)
    workload: Mapping[str, Any]
    warmup: int
    iterations: int
    gpus: int
    executor: Mapping[str, Any]
    has_full_iteration_variant: bool  # a full-iteration variant exists for this shape (fairness of NaN checks)

    @property
    def total_iterations(self) -> int:
        # warmup eager steps, the capture iteration, then the measured ones
        return self.warmup + 1 + self.iterations

    @property
    def is_pair(self) -> bool:
        return self.arm == "pair"

    def pair_arms(self) -> tuple["RunSpec", "RunSpec"]:
        """The two arms one pair job runs: (eager, graph) - or (eager, control) for an A/A cell.

        Each keeps the pair's repeat (the builtin workload's seed), so both arms see the same data.
        """
        if not self.is_pair:
            raise ValueError(f"run {self.run_id!r} is a {self.arm} run, not a pair job (spec `pairing: true`)")
        other = "graph" if self.variant.is_graph else "control"
        eager = replace(self, run_id=pair_run_id(self.run_id, "eager"), arm="eager", variant=EAGER)
        return eager, replace(self, run_id=pair_run_id(self.run_id, other), arm=other)

    def to_record(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep,
            "run_id": self.run_id,
            "shape_id": self.shape_id,
            "cell_id": self.cell_id,
            "arm": self.arm,
            "variant": self.variant.name,
            "impl": self.variant.impl,
            "scope": "+".join(self.variant.scope),
            "repeat": self.repeat,
            "warmup": self.warmup,
            "iterations": self.iterations,
            "gpus": self.gpus,
            "workload": self.workload["kind"],
            "shape": dict(self.shape),
            "settings": dict(self.settings),
        }


@dataclass(frozen=True)
class Cell:
    """Shape x graph variant, judged against the eager baseline of its shape."""

    cell_id: str
    shape_id: str
    variant: Variant
    shape: Mapping[str, Any]
    eager_run_ids: tuple[str, ...]
    graph_run_ids: tuple[str, ...]
    is_control: bool = False
    pair_run_ids: tuple[str, ...] = ()  # pairing: the jobs; eager/graph ids above are their measured arms


def pair_run_id(job_run_id: str, arm: str) -> str:
    """Id of one measured arm of a pair job (a row of runs.parquet): `{cell_id}.pair.r{k}.{arm}`."""
    return f"{job_run_id}.{arm}"


@dataclass(frozen=True)
class Spec:
    path: str
    raw: Mapping[str, Any]
    # cell_id -> repeats wanted for that cell (graphsweep more-repeats, results/{sweep}/extra_repeats.yaml); a cell
    # listed here gets more repeats of its graph arm and its shape's eager baseline (or more pair jobs)
    extra_repeats: Mapping[str, int] = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        return self.raw["sweep"]

    @property
    def axes(self) -> dict[str, list[Any]]:
        return dict(self.raw["axes"])

    @property
    def variants(self) -> list[Variant]:
        return [_variant(self.path, i, v) for i, v in enumerate(self.raw["variants"])]

    @property
    def workload(self) -> dict[str, Any]:
        return dict(self.raw["workload"])

    @property
    def executor(self) -> dict[str, Any]:
        return dict(self.raw.get("executor", {}))

    @property
    def pairing(self) -> bool:
        return bool(self.raw.get("pairing"))

    def with_extra_repeats(self, extra: Mapping[str, int]) -> "Spec":
        """The same sweep with more repeats for some cells (only ever more: fewer would orphan finished runs)."""
        return replace(self, extra_repeats={str(k): int(v) for k, v in extra.items()})

    def shapes(self) -> list[dict[str, Any]]:
        """The cross product of the axes, in spec order, minus excluded shapes."""
        keys = list(self.raw["axes"])
        shapes = [dict(zip(keys, values)) for values in itertools.product(*(self.raw["axes"][k] for k in keys))]
        excludes = self.raw.get("exclude", [])
        kept = [s for s in shapes if not any(all(s.get(k) == v for k, v in ex.items()) for ex in excludes)]
        return kept + [dict(item) for item in self.raw.get("include", []) if dict(item) not in kept]

    def runs(self) -> list[RunSpec]:
        return expand(self)[0]

    def cells(self) -> list[Cell]:
        return expand(self)[1]


# --------------------------------------------------------------------------------------------------
# Loading and validation


def _load_schema() -> dict[str, Any]:
    with open(SCHEMA_PATH) as f:
        return yaml.safe_load(f)


def _key_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "additionalProperties":
        # the offending key is in the message, not the path
        extra = re.findall(r"'([^']+)' was unexpected", error.message)
        if extra:
            parts.append(extra[0])
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        if missing:
            parts.append(missing[0])
    return ".".join(parts) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return f"unknown key; allowed keys here: {', '.join(allowed)}"
    if error.validator == "minItems" and error.validator_value == 1:
        return "must not be empty (give at least one value)"
    if error.validator == "pattern" and error.absolute_path and error.absolute_path[-1] == "sweep":
        return "unsafe sweep name: use letters, digits, '-', '_' and '.' (it becomes a folder name)"
    if error.validator == "enum":
        return f"must be one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "type":
        return f"wrong type: expected {error.validator_value}"
    if error.validator == "required":
        return "required key is missing"
    return error.message


def _apply_defaults(raw: dict[str, Any], schema: Mapping[str, Any]) -> None:
    """Fill `default:` values of the schema (top level and one level of nested objects)."""
    for key, sub in schema.get("properties", {}).items():
        if "default" in sub and key not in raw:
            raw[key] = sub["default"]
        if sub.get("type") == "object" and isinstance(raw.get(key), dict):
            _apply_defaults(raw[key], sub)


def load_spec(path: str | Path) -> Spec:
    """Read, validate and complete a sweep spec; raise SpecError naming file, key and value."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(path, "(file)", str(path), f"cannot read the spec: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(path, "(file)", str(path), f"not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise SpecError(path, "(top level)", raw, "a sweep spec is a mapping with keys sweep, workload, axes, variants")
    return validate_spec(raw, path)


def validate_spec(raw: dict[str, Any], path: str | Path = "<spec>") -> Spec:
    schema = _load_schema()
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise SpecError(path, _key_path(e), e.instance, _describe(e))
    raw = json.loads(json.dumps(raw))  # private copy
    raw.setdefault("executor", {})
    if "source" in raw:  # ingested logs ran already: a preflight rule must not hide them (set it to override)
        raw.setdefault("preflight", "none")
    _apply_defaults(raw, schema)
    _check_semantics(raw, path)
    return Spec(str(path), raw)


def _variant(path: str | Path, index: int, v: Mapping[str, Any]) -> Variant:
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


def _check_semantics(raw: dict[str, Any], path: str | Path) -> None:
    axes, fixed = raw["axes"], raw.get("fixed", {})
    for key in axes:
        if key in fixed:
            raise SpecError(path, f"fixed.{key}", fixed[key], f"'{key}' is also an axis; give it in one place only")
        if len(set(map(json.dumps, axes[key]))) != len(axes[key]):
            raise SpecError(path, f"axes.{key}", axes[key], "duplicate values in an axis")
    for i, ex in enumerate(raw.get("exclude", [])):
        for key in ex:
            if key not in axes:
                raise SpecError(path, f"exclude.{i}.{key}", ex[key], f"not an axis; axes are {', '.join(axes)}")
    for i, item in enumerate(raw.get("include", [])):
        missing = [k for k in axes if k not in item]
        if missing:
            raise SpecError(path, f"include.{i}", item, f"an included shape needs a value for every axis; missing {missing}")
        for key in item:
            if key in fixed:
                raise SpecError(path, f"include.{i}.{key}", item[key], f"'{key}' is fixed; make it an axis to vary it")
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    names: dict[str, int] = {}
    for i, v in enumerate(raw["variants"]):
        variant = _variant(path, i, v)
        ident = (variant.impl, tuple(sorted(variant.scope)))
        if ident in seen and not v.get("overrides"):
            raise SpecError(path, f"variants.{i}", v, f"duplicate variant: same impl and scope as variants.{seen[ident]}")
        if variant.name in names or variant.name in ("eager", "aa"):
            raise SpecError(path, f"variants.{i}.name", variant.name, "duplicate variant name (or reserved: eager, aa)")
        seen[ident], names[variant.name] = i, i
    if raw["workload"]["kind"] == "builtin":
        _check_builtin(raw, path)
    if raw.get("source"):
        from graphsweep.ingest import check_source

        check_source(raw, path)
    spec = Spec(str(path), raw)
    if not spec.shapes():
        raise SpecError(path, "exclude", raw.get("exclude"), "every shape is excluded; nothing would run")


def _check_builtin(raw: dict[str, Any], path: str | Path) -> None:
    axes, fixed = raw["axes"], raw.get("fixed", {})
    included = {k: v for item in raw.get("include", []) for k, v in item.items()}
    for section, mapping in (("axes", axes), ("fixed", fixed), ("include", included)):
        for key in mapping:
            if key not in BUILTIN_SETTINGS:
                raise SpecError(
                    path,
                    f"{section}.{key}",
                    mapping[key],
                    f"the builtin workload has no setting '{key}'; known: {', '.join(sorted(BUILTIN_SETTINGS))}",
                )
    missing = BUILTIN_REQUIRED - set(axes) - set(fixed)
    if missing:
        raise SpecError(path, "fixed", fixed, f"the builtin workload needs {', '.join(sorted(missing))} (in axes or fixed)")
    for i, v in enumerate(raw["variants"]):
        bad = set(v.get("scope", ())) - BUILTIN_SCOPES - {"full_iteration"}
        if bad:
            raise SpecError(
                path, f"variants.{i}.scope", v.get("scope"), f"the builtin workload graphs only {sorted(BUILTIN_SCOPES)}"
            )


# --------------------------------------------------------------------------------------------------
# Expansion


def _short_hash(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha1(blob).hexdigest()[:6]


def _slug_value(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9.]", "", str(value).lower())[:16] or "x"


def shape_slug(shape: Mapping[str, Any]) -> str:
    parts = []
    for key, value in shape.items():
        short = _ABBREVIATIONS.get(key) or _ABBREVIATIONS.get(key.rsplit(".", 1)[-1]) or key.rsplit(".", 1)[-1]
        parts.append(f"{short}{_slug_value(value)}")
    return "-".join(parts)[:60]


def shape_id(spec: Spec, shape: Mapping[str, Any]) -> str:
    raw = spec.raw
    ident = (
        raw["workload"],
        raw.get("fixed", {}),
        dict(shape),
        raw["warmup"],
        raw["iterations"],
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
    Repeat indices only ever grow (spec.extra_repeats), so ids of finished runs never change.
    """
    raw = spec.raw
    variants = spec.variants
    has_full = any(v.is_full_iteration for v in variants)
    runs: list[RunSpec] = []
    cells: list[Cell] = []
    base = int(raw["repeats"])
    extra = spec.extra_repeats
    for shape in spec.shapes():
        sid = shape_id(spec, shape)
        settings = {**raw.get("fixed", {}), **shape}
        common = dict(
            sweep=spec.name,
            shape_id=sid,
            shape=shape,
            settings=settings,
            workload=spec.workload,
            warmup=raw["warmup"],
            iterations=raw["iterations"],
            gpus=int(settings.get("gpus", 1)),
            executor=spec.executor,
            has_full_iteration_variant=has_full,
        )
        shape_cells = [(f"{sid}.{_arm_name(v)}", "graph", v) for v in variants]
        if raw.get("aa_control"):
            shape_cells.append((f"{sid}.aa", "control", Variant("aa", "none")))
        n_of = {cid: max(base, int(extra.get(cid, 0))) for cid, _, _ in shape_cells}
        if spec.pairing:
            for cid, arm, variant in shape_cells:
                jobs = tuple(f"{cid}.pair.r{k}" for k in range(1, n_of[cid] + 1))
                for k, rid in enumerate(jobs, start=1):
                    runs.append(RunSpec(run_id=rid, cell_id=cid, arm="pair", variant=variant, repeat=k, **common))
                eager_ids = tuple(pair_run_id(j, "eager") for j in jobs)
                other_ids = tuple(pair_run_id(j, arm) for j in jobs)
                cells.append(Cell(cid, sid, variant, shape, eager_ids, other_ids, arm == "control", jobs))
            continue
        # the shared baseline has as many repeats as its most repeated cell
        eager_ids = tuple(f"{sid}.eager.r{k}" for k in range(1, max(n_of.values()) + 1))
        for k, rid in enumerate(eager_ids, start=1):
            runs.append(RunSpec(run_id=rid, cell_id=f"{sid}.eager", arm="eager", variant=EAGER, repeat=k, **common))
        for cid, arm, variant in shape_cells:
            ids = tuple(f"{cid}.r{k}" for k in range(1, n_of[cid] + 1))
            for k, rid in enumerate(ids, start=1):
                runs.append(RunSpec(run_id=rid, cell_id=cid, arm=arm, variant=variant, repeat=k, **common))
            cells.append(Cell(cid, sid, variant, shape, eager_ids, ids, is_control=arm == "control"))
    return runs, cells


def runs_by_id(spec: Spec) -> dict[str, RunSpec]:
    return {r.run_id: r for r in spec.runs()}


def iter_axis_names(specs: Iterable[Spec]) -> list[str]:
    names: list[str] = []
    for s in specs:
        names += [k for k in s.axes if k not in names]
    return names
