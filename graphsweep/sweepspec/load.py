"""Load a sweep spec: YAML, the JSON schema with its defaults, the rules a schema cannot say, the workload's own checks.

Every problem is a SpecError that names the file, the key and the value (graphsweep/vocab.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

from graphsweep import resources
from graphsweep.sweepspec.source import check_source
from graphsweep.sweepspec.sweep import Spec, parse_variant
from graphsweep.vocab import RESERVED_VARIANT_NAMES, SpecError
from graphsweep.workloads.registry import workload_for


def _load_schema() -> dict[str, Any]:
    """The sweep schema, package data (graphsweep/schemas/sweep.schema.yaml): an installed graphsweep validates too."""
    return yaml.safe_load(resources.read_text(resources.SWEEP_SCHEMA))


def schema_default(key: str) -> Any:
    """The sweep schema's default for a top-level key (the CLI's defaults come from here, never typed again)."""
    return _load_schema()["properties"][key]["default"]


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


def load_spec(path: str | Path) -> Spec:
    """Read, validate and complete a sweep spec; raise SpecError naming file, key and value."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError(path, "(file)", str(path), f"cannot read the spec: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(path, "(file)", str(path), f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                        f"{exc.start}): a sweep spec is a YAML text file") from None  # fmt: skip
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise SpecError(path, "(file)", str(path), f"not valid YAML: {_yaml_problem(exc)}") from None
    cycle = _find_cycle(raw)
    if cycle:
        raise SpecError(path, cycle, "(a YAML alias that contains itself)",
                        "a value may not refer to itself (an &anchor used inside its own value never ends)")
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


def _check_semantics(raw: dict[str, Any], path: str | Path) -> None:
    axes, fixed = raw["axes"], raw.get("fixed", {})
    for key in axes:
        if key in fixed:
            raise SpecError(path, f"fixed.{key}", fixed[key], f"'{key}' is also an axis; give it in one place only")
        _check_distinct(path, f"axes.{key}", axes[key])
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
    if not spec.shapes():
        raise SpecError(path, "exclude", raw.get("exclude"), "every shape is excluded; nothing would run")
