"""Small helpers for the scripts that Snakemake rules call."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def logging_to(path: str | Path) -> Iterator[None]:
    """Send this script's stdout and stderr to the rule's log file (the snakemake-workflows idiom)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as log:
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = log
        try:
            yield
        finally:
            sys.stdout, sys.stderr = old_out, old_err


def config_problem(error: BaseException) -> str:
    """One line for Snakemake's config-validation error (a WorkflowError around jsonschema's ValidationError)."""
    # Snakemake raises it inside `except ValidationError`: the schema's error is the context
    candidates = (*getattr(error, "args", ()), error.__cause__, error.__context__, error)
    inner = next((a for a in candidates if hasattr(a, "validator") and hasattr(a, "absolute_path")), None)
    if inner is None:
        return " ".join(str(error).split())
    key = ".".join(str(p) for p in inner.absolute_path) or "(top level)"
    if inner.validator == "enum":
        allowed = ", ".join(dict.fromkeys(str(v) for v in inner.validator_value))
        return f"key '{key}' = {inner.instance!r}: must be one of {allowed}"
    if inner.validator == "additionalProperties":
        allowed = ", ".join(sorted(inner.schema.get("properties", {})))
        unknown = sorted(set(inner.instance) - set(inner.schema.get("properties", {})))
        where = f"'{key}.{unknown[0]}'" if inner.absolute_path else f"'{unknown[0]}'" if unknown else f"'{key}'"
        return f"unknown key {where}; the settings here are {allowed}"
    return f"key '{key}' = {inner.instance!r}: {' '.join(inner.message.split())}"
