"""Load a sweep spec: YAML, the JSON schema with its defaults, the rules a schema cannot say, the workload's own checks.

Every problem is a SpecError that names the file, the key and the value (graphsweep/records.py).
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import re
import stat
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml
from referencing import Registry, Resource

from graphsweep import resources, textsafe
from graphsweep.parse.window import MIN_STEADY
from graphsweep.sweepspec.source import check_source
from graphsweep.sweepspec.sweep import Spec, parse_variant
from graphsweep.records import SpecError
from graphsweep.vocab import RESERVED_VARIANT_NAMES
from graphsweep.workloads.registry import workload_for


_YAML = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present


@functools.cache
def _parsed(name: str) -> dict[str, Any]:
    """A schema of the package parsed once a process: one command reads the sweep schema four times, 0.2 s each with
    the pure-Python loader. Callers get copies (_load_schema) or only read it (the cached validator)."""
    return yaml.load(resources.read_text(name), Loader=_YAML)  # noqa: S506 - a safe loader


def _load_schema() -> dict[str, Any]:
    """The sweep schema, package data (graphsweep/schemas/sweep.schema.yaml): an installed graphsweep validates too."""
    return copy.deepcopy(_parsed(resources.SWEEP_SCHEMA))


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    """The sweep schema's validator; its `executor.slurm` is the workflow schema's `slurm` block (one place for the
    Slurm settings a spec and a profile may give), found through the sweep schema's $id."""
    schema = _parsed(resources.SWEEP_SCHEMA)
    config = _parsed(resources.CONFIG_SCHEMA)
    uri = schema["$id"].rsplit("/", 1)[0] + "/" + resources.CONFIG_SCHEMA.rsplit("/", 1)[1]
    registry: Registry = Registry().with_resource(uri, Resource.from_contents(config))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def schema_default(key: str) -> Any:
    """The sweep schema's default for a top-level key (the CLI's defaults come from here, never typed again)."""
    return _load_schema()["properties"][key]["default"]


def block_defaults(key: str) -> dict[str, Any]:
    """A top-level block's properties with the schema's defaults (`decide`, `quiet`): what a spec without it gets."""
    block = _load_schema()["properties"][key]
    return {name: sub["default"] for name, sub in block.get("properties", {}).items() if "default" in sub}


def schema_property(dotted: str) -> dict[str, Any]:
    """The sweep schema of one setting, by its dotted key (`executor.timeout_min`): its type, bounds and default."""
    node: Mapping[str, Any] = _parsed(resources.SWEEP_SCHEMA)
    for key in dotted.split("."):
        node = node["properties"][key]
    return copy.deepcopy(dict(node))


def _key_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "additionalProperties":
        # the offending key is in the message, not the path (with patternProperties: "does not match any of the
        # regexes")
        extra = re.findall(r"'([^']+)' (?:was unexpected|does not match any of the regexes)", error.message)
        if extra:
            parts.append(extra[0])
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        if missing:
            parts.append(missing[0])
    if "propertyNames" in error.schema_path:  # the key itself is wrong: name it
        parts.append(str(error.instance))
    return ".".join(parts) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        return f"unknown key; allowed keys here: {', '.join(allowed)}"
    if error.validator == "minItems" and error.validator_value == 1:
        return "must not be empty (give at least one value)"
    if error.validator == "pattern" and error.absolute_path and error.absolute_path[-1] == "sweep":
        return "unsafe sweep name: use letters, digits, '-', '_' and '.' (it becomes a folder name)"
    if "propertyNames" in error.schema_path and error.absolute_path and error.absolute_path[-1] == "env":
        return ("not an environment variable name: letters, digits and '_', not starting with a digit (the printed "
                "command puts the name in front of the command, where a shell would run what it holds)")
    if "propertyNames" in error.schema_path:
        return f"not a name this setting takes (it must match {error.validator_value})"
    if error.validator == "enum":
        return f"must be one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "type":
        return f"wrong type: expected {error.validator_value}"
    if error.validator in _BOUNDS:
        return f"out of range: {_range(error.schema)}"
    if error.validator == "required":
        return "required key is missing"
    return error.message


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _range(schema: Mapping[str, Any]) -> str:
    """A schema's bounds as a user reads them: 'give a number from 1 to 100,000', 'give a number above 0'."""
    kind = "a whole number" if schema.get("type") == "integer" else "a number"
    low = (f"from {schema['minimum']:,}" if "minimum" in schema else
           f"above {schema['exclusiveMinimum']:,}" if "exclusiveMinimum" in schema else "")
    high = (f"to {schema['maximum']:,}" if "maximum" in schema else
            f"below {schema['exclusiveMaximum']:,}" if "exclusiveMaximum" in schema else "")
    if low.startswith("above") and high:
        high = f"and at most {schema['maximum']:,}" if "maximum" in schema else f"and {high}"
    return f"give {kind} {' '.join(p for p in (low, high) if p)}"


def _apply_defaults(raw: dict[str, Any], schema: Mapping[str, Any]) -> None:
    """Fill `default:` values of the schema (top level and one level of nested objects)."""
    for key, sub in schema.get("properties", {}).items():
        if "default" in sub and key not in raw:
            raw[key] = sub["default"]
        if sub.get("type") == "object" and isinstance(raw.get(key), dict):
            _apply_defaults(raw[key], sub)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error: YAML keeps the last one
    silently, so `hidden: [64, 128]` ... `hidden: [32]` would drop two shapes without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:  # the mapping's own keys; `<<: *anchor` merges may be overridden
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = key_node.value
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "in the mapping that starts", node.start_mark,
                    f"key {key!r} is given twice (first at line {seen[key] + 1}); YAML would keep only the last",
                    key_node.start_mark)  # fmt: skip
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: where it is, what is wrong, and what was being read there."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        text = f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
        if exc.context:
            where = f" at line {exc.context_mark.line + 1}" if exc.context_mark is not None else ""
            text += f" ({exc.context}{where})"
        return text
    return " ".join(str(exc).split())


MAX_YAML_VALUES = 1_000_000  # a spec with 10,000-value axes has ~10^4; an alias bomb has 10^9 and more


def _expanded_values(root: yaml.Node | None) -> int:
    """How many values the YAML holds once every *alias is expanded, counted on the node graph (each node once, so
    a billion-laughs spec is counted in microseconds instead of being built and walked for minutes). A node that
    contains itself is left to _find_cycle, which names its key."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in on_path:
            return 1
        on_path.add(id(node))
        if isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(v) for v in node.value)
        else:
            n = 1
        on_path.discard(id(node))
        sizes[id(node)] = min(n, 10 * MAX_YAML_VALUES)  # enough to refuse; keeps the numbers small
        return sizes[id(node)]

    return size(root) if root is not None else 0


def _find_cycle(value: Any, key: str = "", parents: tuple[int, ...] = ()) -> str | None:
    """The key of a YAML alias that contains itself (`a: &x [*x]`), or None: such a value never ends."""
    if not isinstance(value, (dict, list)):
        return None
    if id(value) in parents:
        return key or "(top level)"
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for k, v in items:
        found = _find_cycle(v, f"{key}.{k}" if key else str(k), (*parents, id(value)))
        if found:
            return found
    return None


MAX_SPEC_BYTES = 16 << 20  # the largest committed spec is a few KB; a spec of 10,000-value axes is ~100 KB


def _read_spec_file(path: Path) -> bytes:
    """The spec's bytes: a regular file of at most MAX_SPEC_BYTES, looked at before it is read (/dev/zero or a named
    pipe would never end, /dev/stdin would wait for a terminal)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            what = "a folder" if stat.S_ISDIR(st.st_mode) else "a device, pipe or socket"
            raise SpecError(path, "(file)", str(path), f"is {what}, not a regular file: a sweep spec is a YAML file")
        with open(path, "rb") as f:
            data = f.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(path, "(file)", str(path), f"cannot read the spec: {exc.strerror}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(path, "(file)", str(path), f"is more than {MAX_SPEC_BYTES:,} bytes: not a sweep spec "
                        "(a spec of 10,000-value axes is about 100 KB)")
    return data


def load_spec(path: str | Path) -> Spec:
    """Read, validate and complete a sweep spec; raise SpecError naming file, key and value."""
    path = Path(path)
    data = _read_spec_file(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(path, "(file)", str(path), f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                        f"{exc.start}): a sweep spec is a YAML text file") from None  # fmt: skip
    try:
        # the node graph first: its expanded size is known before anything is built from it
        expanded = _expanded_values(yaml.compose(text, Loader=_UniqueKeyLoader))  # noqa: S506 - a SafeLoader
        if expanded > MAX_YAML_VALUES:
            raise SpecError(path, "(file)", str(path), f"its &anchors and *aliases expand to more than "
                            f"{MAX_YAML_VALUES:,} values (an alias bomb?): a sweep spec is refused before it is built")
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise SpecError(path, "(file)", str(path), f"not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise SpecError(path, "(file)", str(path), "nested too deeply to be a sweep spec") from None
    cycle = _find_cycle(raw)
    if cycle:
        raise SpecError(path, cycle, "(a YAML alias that contains itself)",
                        "a value may not refer to itself (an &anchor used inside its own value never ends)")
    if not isinstance(raw, dict):
        raise SpecError(path, "(top level)", raw, "a sweep spec is a mapping with keys sweep, workload, axes, variants")
    return validate_spec(raw, path)


def _check_text_and_numbers(raw: Mapping[str, Any], path: str | Path) -> None:
    """Every value is one line of text (the description may have line breaks) and every number is finite."""
    rest = {k: v for k, v in raw.items() if k != "description"}
    found = textsafe.control_character(rest) or textsafe.control_character(
        {k: v for k, v in raw.items() if k == "description"}, allow="\n\t")
    if found:
        key, text, what = found
        raise SpecError(path, key, text, textsafe.one_line_problem(what))
    if bad := textsafe.not_finite(raw):
        raise SpecError(path, bad[0], bad[1], textsafe.NOT_FINITE)


# Slurm settings that are shell code of the batch script (submitit writes `setup` and `teardown` lines as they are and
# `python` unquoted, so that it may be a wrapper such as `singularity exec img python`): the profile's, never a spec's
SHELL_SETTINGS = ("setup", "python", "slurm_setup", "slurm_teardown", "slurm_python")
# What each run's launch plan and executor.timeout_min decide (run/sbatch.py derives them per run)
PLAN_SETTINGS = ("nodes", "gpus_per_node", "tasks_per_node", "timeout_min", "time", "slurm_time", "gres")


def _spec_slurm_problem(key: str) -> str | None:
    """Why a spec's executor.slurm may not give this setting (None: it may, or the schema names it unknown)."""
    if key in SHELL_SETTINGS:
        return ("is shell code that the batch script runs as it is: a sweep spec does not carry shell code; give it "
                "in the Slurm profile (profiles/slurm/cluster.yaml `slurm:`)")
    if key in PLAN_SETTINGS:
        return ("is the job's size or time: nodes and GPUs come from each run's launch plan (gpus, "
                "executor.gpus_per_node) and the time limit from executor.timeout_min x attempt; remove it")
    spec_keys = _parsed(resources.SWEEP_SCHEMA)["properties"]["executor"]["properties"]["slurm"]["properties"]
    profile_keys = _parsed(resources.CONFIG_SCHEMA)["properties"]["slurm"]["properties"]
    if key not in spec_keys and (key in profile_keys or key.startswith("slurm_")):
        return ("is the Slurm profile's setting (profiles/slurm/cluster.yaml `slurm:`): how the cluster is reached "
                f"and waited for, the same for every sweep; a spec may set {', '.join(spec_keys)}")
    return None


def _check_spec_slurm(raw: Mapping[str, Any], path: str | Path) -> None:
    """A spec says where its Slurm jobs run, never what they are: its executor.slurm keys and its extra sbatch lines
    are those a spec may set (the job's size, time, files and shell lines are the plan's and the profile's). Keys of
    the wrong shape are left to the schema, which names them."""
    executor = raw.get("executor")
    slurm = executor.get("slurm") if isinstance(executor, dict) else None
    if not isinstance(slurm, dict):
        return
    for key, value in slurm.items():
        if problem := _spec_slurm_problem(str(key)):
            raise SpecError(path, f"executor.slurm.{key}", value, problem)
    for block in ("sbatch", "slurm_additional_parameters"):
        lines = slurm.get(block)
        for key, value in lines.items() if isinstance(lines, dict) else ():
            if not textsafe.SBATCH_OPTION.fullmatch(str(key)):
                continue
            if problem := textsafe.sbatch_option_problem(str(key), spec=True):
                raise SpecError(path, f"executor.slurm.{block}.{key}", value, problem)


def validate_spec(raw: dict[str, Any], path: str | Path = "<spec>") -> Spec:
    schema = _load_schema()
    if isinstance(raw, dict) and "adaptive_repeats" in raw:  # the two-look design this key switched on is gone
        raise SpecError(path, "adaptive_repeats", raw["adaptive_repeats"], "is replaced by the decision loop, on by "
                        "default: remove the key (the spec's `decide:` block sets its budget; docs/statistics.md)")
    _check_text_and_numbers(raw, path)
    _check_spec_slurm(raw, path)
    errors = sorted(_validator().iter_errors(raw), key=lambda e: list(e.absolute_path))
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


def _same_as(value: Any) -> str:
    """What makes two axis values the same setting: 64 and 64.0 are one number (true stays apart from 1)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(float(value))
    return json.dumps(value, sort_keys=True)


def _check_distinct(path: str | Path, key: str, values: list[Any]) -> None:
    seen: dict[str, Any] = {}
    for value in values:
        same = _same_as(value)
        if same in seen:
            first = seen[same]
            both = f"{value!r} is given twice" if repr(first) == repr(value) else \
                f"{first!r} and {value!r} are the same number"
            raise SpecError(path, key, values, f"duplicate values in an axis: {both} (give each once)")
        seen[same] = value


def _kind(value: Any) -> str:
    """What a YAML scalar is, as a user reads it: 128 and 128.0 are numbers, '128' is text."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "text" if isinstance(value, str) else type(value).__name__


def _check_axis_value(path: str | Path, key: str, axis: str, value: Any, values: list[Any], what: str,
                      on_axis: bool = False) -> None:
    """An exclude/include value must be one the axis can hold: of its type ('128' is not 128) and, for an exclude,
    one of its values (an exclude that matches nothing drops nothing, and the cells it meant to drop run)."""
    kinds = {_kind(v) for v in values}
    if _kind(value) not in kinds:
        hint = f" (write {value} without quotes)" if isinstance(value, str) and _looks_numeric(value) else ""
        raise SpecError(path, key, value, f"is {_kind(value)} but axis '{axis}' holds {' and '.join(sorted(kinds))}"
                        f"{hint}: {what}")
    if on_axis and not any(_same_as(value) == _same_as(v) for v in values):
        raise SpecError(path, key, value, f"is not a value of axis '{axis}' ({', '.join(map(str, values))}): {what}")


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_semantics(raw: dict[str, Any], path: str | Path) -> None:
    axes, fixed = raw["axes"], raw.get("fixed", {})
    for key in axes:
        if key in fixed:
            raise SpecError(path, f"fixed.{key}", fixed[key], f"'{key}' is also an axis; give it in one place only")
        _check_distinct(path, f"axes.{key}", axes[key])
    if raw["launch_gate"] and raw["pairing"]:  # the schema's defaults are filled in
        raise SpecError(path, "launch_gate", True, "a pair job runs both arms in one job, so no eager arm can run "
                        "first: use launch_gate without pairing, or pairing without launch_gate")
    if raw["launch_gate"] and raw["warmup"] < 2:
        raise SpecError(path, "launch_gate", True, f"the gate reads the eager arm's GPU busy time, profiled over "
                        f"iterations 2..warmup (graphsweep/entry/gpu_busy.py): warmup {raw['warmup']} leaves none; "
                        "give warmup >= 2")
    decide = raw["decide"]
    if decide["max_repeats"] > decide["horizon"]:
        raise SpecError(path, "decide.max_repeats", decide["max_repeats"], f"is beyond decide.horizon "
                        f"({decide['horizon']}), the jobs per arm the looks' boundaries are spread over: give "
                        "max_repeats <= horizon, or a larger horizon")
    if decide["enabled"] and raw["repeats"] > decide["max_repeats"]:
        raise SpecError(path, "repeats", raw["repeats"], f"is more than decide.max_repeats ({decide['max_repeats']}), "
                        "the most the decision loop may reach: the first look would already be beyond its budget; "
                        "give repeats <= decide.max_repeats")
    if raw["iterations"] < MIN_STEADY:
        raise SpecError(path, "iterations", raw["iterations"], f"a run needs at least {MIN_STEADY} measured iterations "
                        "for a steady window (graphsweep/parse/window.py MIN_STEADY); with fewer no cell can get a "
                        f"verdict: give iterations >= {MIN_STEADY}")
    for i, ex in enumerate(raw.get("exclude", [])):
        for key in ex:
            if key not in axes:
                raise SpecError(path, f"exclude.{i}.{key}", ex[key], f"not an axis; axes are {', '.join(axes)}")
            _check_axis_value(path, f"exclude.{i}.{key}", key, ex[key], axes[key], "this exclude excludes nothing")
    for i, item in enumerate(raw.get("include", [])):
        missing = [k for k in axes if k not in item]
        if missing:
            raise SpecError(path, f"include.{i}", item, f"an included shape needs a value for every axis; missing {missing}")
        for key in item:
            if key in fixed:
                raise SpecError(path, f"include.{i}.{key}", item[key], f"'{key}' is fixed; make it an axis to vary it")
            if key in axes:
                _check_axis_value(path, f"include.{i}.{key}", key, item[key], axes[key],
                                  "the included shape would be another setting than the axis means")
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    names: dict[str, int] = {}
    for i, v in enumerate(raw["variants"]):
        variant = parse_variant(path, i, v)
        ident = (variant.impl, tuple(sorted(variant.scope)))
        if ident in seen and not v.get("overrides"):
            raise SpecError(path, f"variants.{i}", v, f"duplicate variant: same impl and scope as variants.{seen[ident]}")
        if variant.name in names or variant.name in RESERVED_VARIANT_NAMES:
            raise SpecError(path, f"variants.{i}.name", variant.name,
                            f"duplicate variant name (or reserved: {', '.join(RESERVED_VARIANT_NAMES)})")
        seen[ident], names[variant.name] = i, i
    workload_for(raw["workload"]["kind"]).validate(raw, path)
    if raw.get("source"):
        check_source(raw, path)
    spec = Spec(str(path), raw)
    shapes = spec.shapes()
    if not shapes:
        raise SpecError(path, "exclude", raw.get("exclude"), "every shape is excluded; nothing would run")
    crossed = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    dropped: dict[int, int] = {}  # shape index -> the exclude that drops it first
    for i, ex in enumerate(raw.get("exclude", [])):
        for key in ex:  # after the workload's checks: a value it refuses is named by them first
            _check_axis_value(path, f"exclude.{i}.{key}", key, ex[key], axes[key], "this exclude excludes nothing",
                              on_axis=True)
        hits = [j for j, s in enumerate(crossed) if all(_same_as(s.get(k)) == _same_as(v) for k, v in ex.items())]
        if not hits:
            raise SpecError(path, f"exclude.{i}", ex, "matches no shape of the axes' cross product: it excludes nothing")
        if all(j in dropped for j in hits):
            raise SpecError(path, f"exclude.{i}", ex, f"excludes nothing that exclude.{dropped[hits[0]]} does not "
                            "already exclude: drop it")
        for j in hits:
            dropped.setdefault(j, i)
    kept = [s for s in crossed if not any(all(s.get(k) == v for k, v in ex.items()) for ex in raw.get("exclude", []))]
    for i, item in enumerate(raw.get("include", [])):
        if dict(item) in kept:
            raise SpecError(path, f"include.{i}", item, "is already a shape of the axes (and not excluded): it includes "
                            "nothing; give it a setting of its own or drop it")
    runs = planned_run_count(raw, len(shapes))
    if runs > raw["max_runs"]:
        raise SpecError(path, "axes", {k: f"{len(v)} values" for k, v in axes.items()},
                        f"{len(shapes)} shapes give {runs} runs, more than max_runs ({raw['max_runs']}): Snakemake "
                        f"keeps every job of a sweep in the login node's memory ({SNAKEMAKE_COST}); split the sweep "
                        "into several specs, drop axis values, variants or repeats, or raise max_runs")


# What one planned run costs Snakemake (benchmarks/plan_size.py: `snakemake -n` of the builtin workload), quoted when
# a sweep is refused for its size; the schema's max_runs default stays below where it fell over.
SNAKEMAKE_COST = ("about 70 KB a run: 20,000 runs took 1.4 GB and 3.6 min to plan, 100,000 died of MemoryError at "
                  "5.5 GB")


def planned_run_count(raw: Mapping[str, Any], n_shapes: int) -> int:
    """The runs a spec plans, counted without planning them (so a huge sweep is refused in milliseconds)."""
    cells = len(raw["variants"]) + (1 if raw.get("aa_control") else 0)
    if raw.get("pairing"):
        return n_shapes * cells * int(raw["repeats"])
    return n_shapes * (cells + 1) * int(raw["repeats"])
