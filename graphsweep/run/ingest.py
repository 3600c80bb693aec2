"""Ingest logs that already exist (runs made by hand) as the runs of a sweep: nothing is submitted.

A spec with a `source: {logs: DIR, pattern: REGEX}` block maps every file under DIR whose relative path matches
REGEX (re.fullmatch) to one run: the named group `variant` says the arm (the `eager` text, a variant name or
`aa`), a group per axis with more than one value says the shape (group_name: `train.micro_batch_size` is
`train_micro_batch_size`), `repeat` (optional, any text, numbered in
natural order) the repeat and `part` (optional) orders several files of one run (ranks, restarts). Groups named
after a provenance column (`prov_container`, `prov_gpu_name`, ... see provenance.COLUMNS) record what the file
name says about the environment, so two arms from different containers are refused as a pair.

Each run folder gets the files as `log.txt` (+ `ranks/NNN.log`) and a run.json with executor `ingest`; from there
the workflow's parse, aggregate, compare and report steps run unchanged (rules/ingest.smk stands in for the run
rule). The spec-time checks of the source block are graphsweep/sweepspec/source.py.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from graphsweep import logformat as lf
from graphsweep import provenance
from graphsweep.sweepspec.source import MATCH_TIMEOUT_S, group_name
from graphsweep.sweepspec.sweep import Spec
from graphsweep.fileio import UnusableFile, replacing, write_json
from graphsweep.records import RunRecord
from graphsweep.layout import RunDir
from graphsweep.textsafe import for_terminal
from graphsweep.vocab import AA, CONTROL, EAGER, INGEST


class IngestError(ValueError):
    """The files under source.logs do not map onto the runs of the sweep. The message says what to change."""


def _natural(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text or "")]


def _axis_value(values: list[Any], text: str) -> tuple[bool, Any]:
    for v in values:
        if str(v) == text:
            return True, v
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                if float(text) == float(v):
                    return True, v
            except ValueError:
                pass
    return False, None


@dataclass
class LogMap:
    """The result of matching a folder: run id -> files (part order) and file -> provenance facts."""

    files: dict[str, list[Path]]
    facts: dict[str, dict[str, str]]  # run id -> prov_* column -> value taken from the file name
    ignored: list[str]  # files that do not match the pattern
    excluded: list[str]  # files of shapes the spec excludes
    seed: int | None = None  # source.seed: the training seed of the logs that print none
    root: Path | None = None  # source.logs, resolved: the only folder a log is read from

    def input_files(self, wildcards: Any) -> list[str]:
        """Snakemake input function of rules/ingest.smk: the files of wildcards.run_id."""
        return [str(p) for p in self.files[wildcards.run_id]]

    def unseeded(self) -> list[str]:
        """Runs whose logs state no training seed (Megatron's seed line or Bridge's [rng] summary) and that the
        spec gives none (source.seed): their loss parity cannot be checked, and a speedup of theirs is unverified."""
        if self.seed is not None:
            return []
        return [rid for rid, files in self.files.items() if not any(_states_seed(f) for f in files)]

    def facts_of(self, wildcards: Any) -> dict[str, str]:
        """What the file names say about the environment (prov_* groups of source.pattern)."""
        return dict(self.facts.get(wildcards.run_id, {}))


def _states_seed(path: Path) -> bool:
    with open(path, "rb") as f:
        return any(lf.SEED_NEEDLE in line or lf.RNG_SECTION in line for line in f)


def unseeded_note(logmap: LogMap, spec_path: str | Path) -> str | None:
    """The one line that says which runs' loss parity cannot be checked, and how to fix it (None: all seeded)."""
    missing = logmap.unseeded()
    if not missing:
        return None
    return (f"{spec_path}: {len(missing)} of {len(logmap.files)} runs' logs state no training seed (e.g. {missing[0]}): "
            "their loss parity is unchecked and a speedup of theirs reads unverified; set source.seed in the spec")


# Folders of the kernel and of devices: what reads like a file there is a process's memory, environment or a device
SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))


def _system_folder(path: Path) -> Path | None:
    return next((f for f in SYSTEM_FOLDERS if path == f or f in path.parents), None)


def outside_problem(path: Path, root: Path) -> str | None:
    """Why a log under source.logs is not one graphsweep reads (None: it is): a link whose file lies outside the
    folder the user named (a private file, /proc/self/environ), or not a regular file (a device, pipe or socket)."""
    try:
        real = path.resolve(strict=True)
        st = real.stat()
    except (OSError, RuntimeError) as exc:  # a dangling link, a loop
        return f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if real != root and root not in real.parents:
        return (f"is a link to {real}, outside source.logs: graphsweep reads only the files of the folder the spec "
                "names; copy the log into it")
    if not stat.S_ISREG(st.st_mode) or _system_folder(real):
        return "is not a regular file (a device, pipe, socket or a file of /proc or /sys): not a log"
    return None


def match_files(spec: Spec) -> LogMap:
    """Map the files of source.logs onto the spec's runs; raise IngestError listing every problem found."""
    src = spec.source
    if src is None:
        raise IngestError(f"{spec.path}: no source block: nothing to ingest")
    if not src.folder.is_dir():
        raise IngestError(for_terminal(f"{spec.path}: source.logs = {str(src.folder)!r}: no such folder"))
    root = src.folder.resolve()
    if system := _system_folder(root):
        raise IngestError(for_terminal(f"{spec.path}: source.logs = {str(src.folder)!r} is in {system}: the kernel's "
                                       "and the devices' files are no logs; give the folder that holds the logs"))
    axes = spec.axes
    shapes = {json.dumps(s, sort_keys=True, default=str) for s in spec.shapes()}
    variants = {v.name for v in spec.variants}
    if spec.aa_control:
        variants.add(AA)
    problems: list[str] = []
    groups: dict[tuple[str, str], dict[str, dict[str, list[tuple[str, Path]]]]] = {}
    facts_by: dict[tuple[str, str, str], dict[str, str]] = {}
    ignored, excluded = [], []
    same_file: dict[tuple[int, int], str] = {}  # a symbolic or hard link to a log is that log, not another job
    # every entry but a folder (rglob does not follow a linked folder): a link or a device that matches is named
    for path in sorted(p for p in src.folder.rglob("*") if not p.is_dir()):
        rel = path.relative_to(src.folder).as_posix()
        try:
            m = src.fullmatch(rel)
        except TimeoutError:
            raise IngestError(f"{spec.path}: source.pattern = {src.pattern.pattern!r} took more than "
                              f"{MATCH_TIMEOUT_S:g} s on the file name {rel!r}: it backtracks without end (nested "
                              "repeats such as (a+)+); write it without repeats inside repeats") from None
        if not m:
            ignored.append(rel)
            continue
        if problem := outside_problem(path, root):
            problems.append(f"{rel}: {problem}")
            continue
        st = path.stat()
        if (st.st_dev, st.st_ino) in same_file:
            problems.append(f"{rel}: the same file as {same_file[(st.st_dev, st.st_ino)]} (a link): one log is one "
                            "job; remove the link")
            continue
        same_file[(st.st_dev, st.st_ino)] = rel
        g = {k: v for k, v in m.groupdict().items() if v is not None}
        text = g.get("variant", "")
        variant = EAGER if text == src.eager else text
        if variant != EAGER and variant not in variants:
            problems.append(f"{rel}: variant {text!r} is neither the eager text {src.eager!r} nor a variant of the "
                            f"sweep ({', '.join(sorted(variants))})")  # fmt: skip
            continue
        shape: dict[str, Any] = {}
        for axis, values in axes.items():
            if group_name(axis) in g:
                text = g[group_name(axis)]
                ok, value = _axis_value(values, text)
                if not ok:
                    problems.append(f"{rel}: {axis} = {text!r} is not one of the sweep's values {values}")
                    break
                shape[axis] = value
            else:
                shape[axis] = values[0]  # a one-value axis (check_source demands a group for the others)
        else:
            key = json.dumps(shape, sort_keys=True, default=str)
            if key not in shapes:
                excluded.append(rel)
                continue
            repeat, part = g.get("repeat", ""), g.get("part", "")
            groups.setdefault((key, variant), {}).setdefault(repeat, {}).setdefault(part, []).append((rel, path))
            facts = {k: v for k, v in g.items() if k in provenance.COLUMNS}
            facts_by[(key, variant, repeat)] = {**facts_by.get((key, variant, repeat), {}), **facts}
    # runs of the spec by (shape, variant name, repeat number)
    wanted: dict[tuple[str, str, int], str] = {}
    for run in spec.runs():
        name = EAGER if run.arm == EAGER else (AA if run.arm == CONTROL else run.variant.name)
        wanted[(json.dumps(dict(run.shape), sort_keys=True, default=str), name, run.repeat)] = run.run_id
    files: dict[str, list[Path]] = {}
    facts: dict[str, dict[str, str]] = {}
    for (key, variant), repeats in groups.items():
        ordered = sorted(repeats, key=_natural)
        if len(ordered) > spec.repeats:
            problems.append(f"{len(ordered)} repeats of {variant} for shape {key} ({', '.join(ordered)}) but the spec "
                            f"has repeats: {spec.repeats}; raise repeats or move the extra logs away")  # fmt: skip
            continue
        for k, rep in enumerate(ordered, start=1):
            parts = repeats[rep]
            if len(parts) == 1 and len(next(iter(parts.values()))) > 1:
                names = ", ".join(r for r, _ in next(iter(parts.values())))
                problems.append(f"several files map to one run ({names}): add a (?P<repeat>...) group if they are "
                                "separate jobs or a (?P<part>...) group if they are ranks/restarts of one job")  # fmt: skip
                continue
            run_id = wanted[(key, variant, k)]
            files[run_id] = [p for part in sorted(parts, key=_natural) for _, p in parts[part]]
            facts[run_id] = facts_by.get((key, variant, rep), {})
    missing = [rid for rid in wanted.values() if rid not in files]
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        problems.append(f"no log for {len(missing)} run(s) of the sweep: {shown}; lower repeats, exclude those shapes, "
                        f"or check source.pattern ({src.pattern.pattern!r}) against the file names")  # fmt: skip
    if problems:
        hint = f" ({len(ignored)} file(s) did not match the pattern, e.g. {ignored[0]})" if ignored else ""
        # file names and group texts are anyone's text: their control characters spelled out (a name's escape
        # sequence would repaint the terminal that shows this)
        listed = "\n  - ".join(problems)
        raise IngestError(for_terminal(f"{spec.path}: source.logs = {str(src.folder)!r}:\n  - {listed}{hint}"))
    return LogMap(files, facts, ignored, excluded, src.seed, root)


def _utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds")


def _set(d: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        d = d.setdefault(key, {})
    d[path[-1]] = value


def _copy_log(src: Path, dest: Path, root: Path | None) -> dict[str, Any]:
    """Copy one log into the run folder, whole or not at all, and say what was copied (path, sha256, bytes, mtime).

    Opened by its real path without following a last link, and checked once open (fstat, and the file the open
    descriptor names) to be a regular file inside `root`: a link swapped in after match_files looked at the folder
    copies nothing from outside it."""
    if root is not None and (problem := outside_problem(src, root)):
        raise UnusableFile(src, problem, "ingest reads only the logs of source.logs")
    real = src.resolve(strict=True)
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        opened = Path(os.readlink(f"/proc/self/fd/{fd}")) if Path("/proc/self/fd").is_dir() else real
        if not stat.S_ISREG(st.st_mode) or (root is not None and root not in opened.parents):
            raise UnusableFile(src, f"changed while it was ingested (it now names {opened})", "ingest it again")
        digest = hashlib.sha256()
        with replacing(dest) as tmp, open(tmp, "wb") as out:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
    return {"path": str(real), "sha256": digest.hexdigest(), "bytes": st.st_size, "mtime": st.st_mtime}


def write_run(run: RunDir, files: list[Path], facts: Mapping[str, str] | None = None,
              seed: int | None = None, root: Path | None = None) -> dict[str, Any]:
    """The run folder of an ingested run: log.txt, ranks/ (NNN.log for further files) and run.json (with the spec's
    source.seed, which the parser takes where the log states no seed). `root`: source.logs, the only folder a log
    is read from."""
    run.root.mkdir(parents=True, exist_ok=True)
    if run.ranks.is_dir():
        shutil.rmtree(run.ranks)
    run.ranks.mkdir()  # a declared output, empty for a run of one file
    dests = [run.log] + [run.ranks / f"{i:03d}.log" for i in range(1, len(files))]
    copied = [_copy_log(f, dest, root) for f, dest in zip(files, dests)]
    prov: dict[str, Any] = {"source": "ingest"}
    for col, value in (facts or {}).items():
        _set(prov, provenance.COLUMNS[col], value)
    record = RunRecord.from_dict({  # run.json's one record (records.RunRecord), as the job and the gate write it
        "run_id": run.run_id,
        "executor": INGEST,
        "job_id": None,
        "attempt": 1,
        "state": None,  # unknown: the outcome comes from the log alone
        "exit_code": None,
        "command": None,
        "host": None,
        "start_utc": _utc(min(c["mtime"] for c in copied)),  # file times: when the logs were last written
        "end_utc": _utc(max(c["mtime"] for c in copied)),
        "wall_s": None,
        "gpu_seconds": None,
        "source_files": [{k: c[k] for k in ("path", "sha256", "bytes")} for c in copied],
        "provenance": prov,
        "seed": seed,
    })
    write_json(run.run_json, record.to_dict())
    return record.to_dict()
