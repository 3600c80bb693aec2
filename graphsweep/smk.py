"""Small helpers for the scripts that Snakemake rules call."""

from __future__ import annotations

import contextlib
import getpass
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from graphsweep import textsafe
from graphsweep.layout import RunDir
from graphsweep.fileio import UnusableFile
from graphsweep.records import SpecError


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


def refuse(line: str) -> None:
    """Stop the workflow while the Snakefile is read: one line on stderr, exit status 2, nothing run or written."""
    print(" ".join(line.split()), file=sys.stderr, flush=True)
    raise SystemExit(2)


def unwritable(folder: Path) -> str | None:
    """Why `folder` cannot be made or written (a file in the way, a read-only or special filesystem), or None.

    Tried, not guessed from permission bits (root passes every os.access check, /proc and read-only mounts still
    refuse): a temporary folder is made in the nearest existing ancestor and removed again."""
    existing = next((p for p in [folder, *folder.parents] if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        return f"{existing} is a file, so {folder} cannot be made"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".graphsweep-probe-", dir=existing))
    except OSError as exc:
        where = "" if existing == folder else f", so {folder} cannot be made"
        return f"{existing} does not let user {getpass.getuser()} write in it ({exc.strerror}){where}"
    return None


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """A damaged input (UnusableFile) or a bad spec fails the rule with one line, in its log and on the terminal, and
    exit status 2: no traceback. The rule's outputs are `update()`-flagged, so Snakemake restores their last good
    version (rules/*.smk); the controller's last line says how to go on (run/controller.py how_to_resume)."""
    try:
        yield
    except (UnusableFile, SpecError) as exc:
        line = f"graphsweep: {' '.join(str(exc).split())}"
        print(line, flush=True)
        if sys.__stderr__ is not None and sys.__stderr__ is not sys.stdout:
            print(line, file=sys.__stderr__, flush=True)
        raise SystemExit(2) from None


def run_dir(*files: Any) -> RunDir:
    """The run folder of a rule's declared files (snakemake.input / snakemake.output entries), checked to be one, and
    to lie inside its sweep's folder (a run folder linked elsewhere is refused: UnusableFile, one line)."""
    run = RunDir.of(*(str(f) for f in files))
    if outside := run.link_out():
        raise UnusableFile(*outside)
    return run


def run_dirs(**files: Sequence[Any]) -> list[RunDir]:
    """One RunDir per run from a rule's declared per-run file lists (aggregate: run.json, summary.json, ... of each
    run, in the same order), each checked to be the files of one folder."""
    lists = [list(v) for v in files.values()]
    if len({len(v) for v in lists}) > 1:
        raise ValueError(f"per-run inputs of different lengths: {', '.join(f'{k} {len(v)}' for k, v in files.items())}")
    return [run_dir(*group) for group in zip(*lists)]


def config_problem(error: BaseException) -> tuple[str, str]:
    """(the dotted key, one line) for Snakemake's config-validation error (a WorkflowError around jsonschema's
    ValidationError)."""
    # Snakemake raises it inside `except ValidationError`: the schema's error is the context
    candidates = (*getattr(error, "args", ()), error.__cause__, error.__context__, error)
    inner = next((a for a in candidates if hasattr(a, "validator") and hasattr(a, "absolute_path")), None)
    if inner is None:
        return "", " ".join(str(error).split())
    key = ".".join(str(p) for p in inner.absolute_path) or "(top level)"
    if "propertyNames" in inner.schema_path:  # the key itself is wrong
        return key, f"key '{key}.{inner.instance}': not a name this setting takes (it must match {inner.validator_value})"
    if inner.validator == "enum":
        allowed = ", ".join(dict.fromkeys(str(v) for v in inner.validator_value))
        return key, f"key '{key}' = {inner.instance!r}: must be one of {allowed}"
    if inner.validator == "additionalProperties":
        allowed = ", ".join(sorted(inner.schema.get("properties", {})))
        unknown = sorted(set(inner.instance) - set(inner.schema.get("properties", {})))
        where = f"{key}.{unknown[0]}" if inner.absolute_path and unknown else unknown[0] if unknown else key
        return where, f"unknown key '{where}'; the settings here are {allowed}"
    return key, f"key '{key}' = {inner.instance!r}: {' '.join(inner.message.split())}"


def unsafe_setting(config: Any) -> tuple[str, str] | None:
    """What the workflow schema cannot say about the settings (configs/config.yaml, the Slurm profile's cluster.yaml,
    --config): a value with a line break or another control character (it reaches a batch script: a partition
    `batch\ntouch x` would run `touch x`), or a number that is not finite (`status_interval_s: .nan` passes every
    schema bound). (the dotted key, one line naming the key and the value), or None."""
    if found := textsafe.control_character(config):
        key, text, what = found
        return key, f"key '{key}' = {text!r}: {textsafe.one_line_problem(what)}"
    if bad := textsafe.not_finite(config):
        return bad[0], f"key '{bad[0]}' = {bad[1]}: {textsafe.NOT_FINITE}"
    return None


def setting_file(key: str, given: Mapping[str, Any], files: Sequence[str | Path], load: Callable[[str], Any]) -> str:
    """Where a workflow setting comes from: `--config` (`given`), else the last of the config `files` (in the order
    Snakemake applies them, loaded with `load`) that sets its first key, as a path from here."""
    top = key.split(".")[0]
    if top in given:
        return "--config"
    for path in reversed(list(files)):
        try:
            data = load(str(path))
        except Exception:  # noqa: BLE001 - a file Snakemake read already; this only names it
            continue
        if isinstance(data, Mapping) and top in data:
            return os.path.relpath(path)
    return "configs/config.yaml or --config"


def run_config(input: Any, output: Any, params: Any) -> tuple[Any, Any]:
    """The run rule's config.yaml and its launch record: (the file, None) where the rule reads config.yaml as an
    input; (the file to write, the record) where it hands the record over as `params.config` and declares
    `output.config` (run/runrule.py begin_run writes it)."""
    record = params.get("config")
    return (input.config, None) if record is None else (output.config, record)
