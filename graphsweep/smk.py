"""Small helpers for the scripts that Snakemake rules call."""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import itertools
import os
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from graphsweep import textsafe
from graphsweep.layout import RunDir
from graphsweep.fileio import NO_ROOM, NoRoom, UnusableFile
from graphsweep.records import SpecError


@contextlib.contextmanager
def logging_to(path: str | Path) -> Iterator[None]:
    """Send this script's stdout and stderr to the rule's log file (the snakemake-workflows idiom)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    log = open(path, "a")
    old_out, old_err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = log
    try:
        yield
    finally:
        sys.stdout, sys.stderr = old_out, old_err
        try:
            log.close()
        except OSError as exc:  # a full disk: the log's last lines are lost (one_line_errors put them on the terminal)
            if exc.errno not in NO_ROOM:
                raise


def refuse(line: str) -> None:
    """Stop the workflow while the Snakefile is read: one line on stderr, exit status 2, nothing run or written."""
    print(textsafe.for_terminal(" ".join(line.split())), file=sys.stderr, flush=True)
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
    """A damaged input (UnusableFile), a bad spec or a full disk (NoRoom) fails the rule with one line, on the
    terminal and in its log, and exit status 2: no traceback. The rule's outputs are `update()`-flagged, so
    Snakemake restores their last good version (rules/*.smk); the controller's last line says how to go on
    (run/controller.py how_to_resume)."""
    try:
        yield
    except (UnusableFile, SpecError, NoRoom) as exc:
        line = textsafe.for_terminal(f"graphsweep: {' '.join(str(exc).split())}")
        # the terminal first: on a full disk the rule's log (stdout here) may take no more lines
        if sys.__stderr__ is not None and sys.__stderr__ is not sys.stdout:
            print(line, file=sys.__stderr__, flush=True)
        with contextlib.suppress(OSError):
            print(line, flush=True)
        raise SystemExit(2) from None


def room_problem(folder: str | Path, min_free_mb: int) -> str | None:
    """Why a sweep cannot write its files in `folder` (or the nearest folder above it that exists): its filesystem
    has less than `min_free_mb` MiB free (the workflow setting min_free_mb), or the file size limit (`ulimit -f`) is
    below that. None: there is room, or min_free_mb is 0.

    Snakemake copies every derived table before its job rewrites it (update()), every job writes logs and records:
    a sweep started on a full disk stops inside Snakemake with a traceback, not at a line of graphsweep's."""
    least = int(min_free_mb) << 20
    if not least:
        return None
    existing = next((p for p in [Path(folder), *Path(folder).parents] if p.exists()), None)
    if existing is None:
        return None
    try:
        st = os.statvfs(existing)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free < least:
        return (f"the filesystem of {existing} has {free / 2**20:.1f} MiB free, less than min_free_mb "
                f"({min_free_mb} MiB): free space there, or give a results folder on another filesystem "
                "(--config results=DIR)")
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and limit < least:
        return (f"the file size limit (ulimit -f) is {limit:,} bytes, less than min_free_mb ({min_free_mb} MiB) "
                "that a table or a log may take: raise it (ulimit -f unlimited)")
    return None


def file_versions(paths: Sequence[str | Path]) -> dict[str, tuple[int, str]]:
    """path -> (mtime in ns, sha256) of each of these files that exists: what an update() output was before its job."""
    out = {}
    for path in paths:
        try:
            st = os.stat(path)
            with open(path, "rb") as f:
                out[str(path)] = (st.st_mtime_ns, hashlib.file_digest(f, "sha256").hexdigest())
        except OSError:
            continue
    return out


def date_restored(before: dict[str, tuple[int, str]]) -> list[str]:
    """Give each file that holds what it held before (Snakemake restored the last good version of a failed job's
    update() output: a copy, with a new mtime) its old mtime back, so that it stays older than the inputs the
    failed job had, and the next run makes it again instead of taking it for up to date. The files dated back."""
    dated = []
    for path, (mtime_ns, digest) in before.items():
        now = file_versions([path]).get(path)
        if now is not None and now[0] != mtime_ns and now[1] == digest:
            with contextlib.suppress(OSError):
                os.utime(path, ns=(mtime_ns, mtime_ns))
                dated.append(path)
    return dated


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


def time_limit_problem(overwrite: Any, attempts: int, wildcards: Iterable[Any], most_min: int,
                       rule: str = "run", resource: str = "timeout_min") -> str | None:
    """A profile's `set-resources: {run: {timeout_min: ...}}` (or `--set-resources run:timeout_min=...`) that is no
    time limit: evaluated as Snakemake evaluates it for a job (a whole number, a Python expression of `attempt`, ...),
    for every attempt (and every run's wildcards, when it reads them), it must be a whole number of minutes from 1 to
    `most_min` x attempt. Checked before any job: a run would otherwise fail at submission with a ValueError. One
    line naming the setting and its value, or None."""
    given = overwrite.get(rule) if hasattr(overwrite, "get") else None
    setting = given.get(resource) if hasattr(given, "get") else None
    if setting is None:
        return None
    raw = getattr(setting, "raw", setting)
    where = f"set-resources {rule}.{resource} = {raw!r}"
    # every run's wildcards only for an expression that reads them (made lazily: 20,000 take most of a second)
    runs = list(wildcards if "wildcards" in str(raw) else itertools.islice(wildcards, 1))
    for attempt in range(1, attempts + 1):
        for wc in runs:
            try:
                value = setting.evaluate(wildcards=wc, input=[], attempt=attempt, rulename=rule, threads=1,
                                         async_run=None).value if hasattr(setting, "evaluate") else setting
            except Exception as exc:  # noqa: BLE001 - whatever the expression raises, it is no time limit
                cause = exc.__cause__ or exc.__context__ or exc  # what the expression raised, inside WorkflowError
                return f"{where}: cannot be evaluated for attempt {attempt} ({type(cause).__name__}: {cause})"
            limit = most_min * attempt
            if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= limit):
                return (f"{where} gives {value!r} for attempt {attempt}: the run's time limit is a whole number of "
                        f"minutes from 1 to {limit:,} (attempt x {most_min:,}), e.g. \"60 * attempt\"")
    return None


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
    `batch\ntouch x` would run `touch x`), a number that is not finite (`status_interval_s: .inf` would never
    ask sacct again), an extra sbatch line that sets what graphsweep sets. (the dotted key, one line naming the key
    and the value), or None."""
    if found := textsafe.control_character(config):
        key, text, what = found
        return key, f"key '{key}' = {text!r}: {textsafe.one_line_problem(what)}"
    if bad := textsafe.not_finite(config):
        return bad[0], f"key '{bad[0]}' = {bad[1]}: {textsafe.NOT_FINITE}"
    return slurm_profile_problem(config)


def slurm_profile_problem(config: Any) -> tuple[str, str] | None:
    """An extra sbatch line of the profile (`slurm.sbatch`, `slurm.slurm_additional_parameters`, or a submitit
    `slurm_*` parameter) that would set what graphsweep sets for every run: the job's size, time limit, files or
    submitit's own options (textsafe.PLAN_SBATCH_OPTIONS). (the dotted key, one line naming it), or None."""
    slurm = config.get("slurm") if isinstance(config, dict) else None
    if not isinstance(slurm, dict):
        return None
    given = [(f"slurm.{block}.{key}", key, value) for block in ("sbatch", "slurm_additional_parameters")
             if isinstance(slurm.get(block), dict) for key, value in slurm[block].items()]
    given += [(f"slurm.{key}", key.removeprefix("slurm_"), value) for key, value in slurm.items()
              if isinstance(key, str) and key.startswith("slurm_") and key != "slurm_additional_parameters"]
    for where, option, value in given:
        if problem := textsafe.sbatch_option_problem(str(option), spec=False):
            return where, f"key '{where}' = {value!r}: {problem}"
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
        # no second question when the first went unanswered: an unreachable controller costs each client call 9 s
        listed = _slurm_output("sinfo", "-h", "-o", "%P") if config else ""
        default = next((p[:-1] for p in listed.split() if p.endswith("*")), None)
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


def setting_on(value: object) -> bool:
    """A yes/no workflow setting as typed on the command line (`--config rounds=false` gives the text "false")."""
    return value if isinstance(value, bool) else str(value).strip().lower() not in ("0", "false", "no", "off")


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
