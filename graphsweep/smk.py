"""Small helpers for the scripts that Snakemake rules call."""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

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


def config_problem(error: BaseException) -> str:
    """One line for Snakemake's config-validation error (a WorkflowError around jsonschema's ValidationError)."""
    # Snakemake raises it inside `except ValidationError`: the schema's error is the context
    candidates = (*getattr(error, "args", ()), error.__cause__, error.__context__, error)
    inner = next((a for a in candidates if hasattr(a, "validator") and hasattr(a, "absolute_path")), None)
    if inner is None:
        return " ".join(str(error).split())
    key = ".".join(str(p) for p in inner.absolute_path) or "(top level)"
    if "propertyNames" in inner.schema_path:  # the key itself is wrong
        return f"key '{key}.{inner.instance}': not a name this setting takes (it must match {inner.validator_value})"
    if inner.validator == "enum":
        allowed = ", ".join(dict.fromkeys(str(v) for v in inner.validator_value))
        return f"key '{key}' = {inner.instance!r}: must be one of {allowed}"
    if inner.validator == "additionalProperties":
        allowed = ", ".join(sorted(inner.schema.get("properties", {})))
        unknown = sorted(set(inner.instance) - set(inner.schema.get("properties", {})))
        where = f"'{key}.{unknown[0]}'" if inner.absolute_path else f"'{unknown[0]}'" if unknown else f"'{key}'"
        return f"unknown key {where}; the settings here are {allowed}"
    return f"key '{key}' = {inner.instance!r}: {' '.join(inner.message.split())}"


def unsafe_setting(config: Any) -> str | None:
    """What the workflow schema cannot say about the settings (configs/config.yaml, the Slurm profile's cluster.yaml,
    --config): a value with a line break or another control character (it reaches a batch script: a partition
    `batch\ntouch x` would run `touch x`), or a number that is not finite (`status_interval_s: .inf` would never
    ask sacct again). One line naming the key and the value, or None."""
    if found := textsafe.control_character(config):
        key, text, what = found
        return f"key '{key}' = {text!r}: {textsafe.one_line_problem(what)}"
    if bad := textsafe.not_finite(config):
        return f"key '{bad[0]}' = {bad[1]}: {textsafe.NOT_FINITE}"
    return None


# The Slurm commands a sweep on Slurm needs on the controller's host: submitit submits with sbatch and reads job
# states with sacct; srun starts a Megatron run's training step (and submitit looks for it to detect Slurm).
SLURM_COMMANDS = ("sbatch", "srun", "sacct")


def no_slurm_here(spec: str, runs: int) -> str | None:
    """One line when a sweep would submit `runs` runs to Slurm and this host has no Slurm commands on PATH (a laptop,
    a workstation): where to run it instead. None when they are all here. (Without it every run rule failed with
    submitit's "Could not detect srun" traceback, and the last line suggested the same command again.)"""
    missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
    if not missing:
        return None
    return (f"graphsweep: this sweep submits its {runs} runs to Slurm (the Slurm profile, or executor.cluster: slurm), "
            f"but this host has no Slurm: {', '.join(missing)} not on PATH. Run it on the cluster's login node; here, "
            f"`snakemake -n --profile slurm --config spec={shlex.quote(spec)}` shows what it would submit, and "
            f"`snakemake --cores 2 --config spec={shlex.quote(spec)} cluster=local` runs it on this machine")


def _slurm_output(*argv: str) -> str:
    """A Slurm command's stdout, or "" when it is missing, fails or takes more than 10 s (a busy controller)."""
    if shutil.which(argv[0]) is None:
        return ""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def slurm_target(runs: int, partition: str | None, account: str | None) -> str:
    """The dry run's line: which Slurm cluster, partition (the cluster's default when the settings give none) and
    account the sweep's runs would be submitted to, asked of Slurm itself (scontrol, sinfo) where it answers."""
    config = _slurm_output("scontrol", "show", "config")
    cluster = next((line.split("=", 1)[1].strip() for line in config.splitlines()
                    if line.split("=", 1)[0].strip() == "ClusterName" and "=" in line), None)
    if partition:
        where = f"partition {partition}"
    else:
        default = next((p[:-1] for p in _slurm_output("sinfo", "-h", "-o", "%P").split() if p.endswith("*")), None)
        where = (f"partition {default} (the cluster's default: the profile gives none)" if default else
                 "the cluster's default partition (the profile gives none)")
    name = f"Slurm cluster '{cluster}'" if cluster else "Slurm (cluster unknown: no Slurm answers on this host)"
    paying = f", account {account}" if account else ""
    missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
    here = f"; this host has no {', '.join(missing)}: start the real run on the cluster's login node" if missing else ""
    return f"graphsweep: dry run: {runs} runs would be submitted to {name}, {where}{paying}{here}"


def slurm_first_words(pending: Sequence[str], slurm: Mapping[str, Any], spec: str, dry_run: bool) -> None:
    """Called once while the Snakefile is read, for a sweep whose runs go to Slurm: a dry run says where the
    `pending` runs (those without a run.json) would be submitted; a real one on a host without Slurm stops here,
    one line and exit status 2, before any job. Nothing when no run is pending (a finished sweep needs no Slurm)."""
    if not pending:
        return
    if dry_run:
        print(slurm_target(len(pending), slurm.get("partition"), slurm.get("account")), file=sys.stderr, flush=True)
    elif problem := no_slurm_here(spec, len(pending)):
        refuse(problem)
