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
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from graphsweep import logformat as lf
from graphsweep import provenance
from graphsweep.sweepspec.source import MATCH_TIMEOUT_S, group_name
from graphsweep.sweepspec.sweep import Spec
from graphsweep.store.archive import sha256_file
from graphsweep.fileio import write_json
from graphsweep.records import RunRecord
from graphsweep.layout import RunDir
from graphsweep.vocab import AA, CONTROL, EAGER


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


def match_files(spec: Spec) -> LogMap:
    """Map the files of source.logs onto the spec's runs; raise IngestError listing every problem found."""
    src = spec.source
    if src is None:
        raise IngestError(f"{spec.path}: no source block: nothing to ingest")
    if not src.folder.is_dir():
        raise IngestError(f"{spec.path}: source.logs = {str(src.folder)!r}: no such folder")
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
    for path in sorted(p for p in src.folder.rglob("*") if p.is_file()):
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
        raise IngestError(f"{spec.path}: source.logs = {str(src.folder)!r}:\n  - " + "\n  - ".join(problems) + hint)
    return LogMap(files, facts, ignored, excluded, src.seed)


def _utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds")


def _set(d: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        d = d.setdefault(key, {})
    d[path[-1]] = value


def write_run(run: RunDir, files: list[Path], facts: Mapping[str, str] | None = None,
              seed: int | None = None) -> dict[str, Any]:
    """The run folder of an ingested run: log.txt, ranks/ (NNN.log for further files) and run.json (with the spec's
    source.seed, which the parser takes where the log states no seed)."""
    run.root.mkdir(parents=True, exist_ok=True)
    if run.ranks.is_dir():
        shutil.rmtree(run.ranks)
    run.ranks.mkdir()  # a declared output, empty for a run of one file
    shutil.copyfile(files[0], run.log)
    for i, extra in enumerate(files[1:], start=1):
        shutil.copyfile(extra, run.ranks / f"{i:03d}.log")
    stats = [f.stat() for f in files]
    prov: dict[str, Any] = {"source": "ingest"}
    for col, value in (facts or {}).items():
        _set(prov, provenance.COLUMNS[col], value)
    record = RunRecord.from_dict({  # run.json's one record (records.RunRecord), as the job and the gate write it
        "run_id": run.run_id,
        "executor": "ingest",
        "job_id": None,
        "attempt": 1,
        "state": None,  # unknown: the outcome comes from the log alone
        "exit_code": None,
        "command": None,
        "host": None,
        "start_utc": _utc(min(s.st_mtime for s in stats)),  # file times: when the logs were last written
        "end_utc": _utc(max(s.st_mtime for s in stats)),
        "wall_s": None,
        "gpu_seconds": None,
        "source_files": [{"path": str(f.resolve()), "sha256": sha256_file(f), "bytes": s.st_size} for f, s in zip(files, stats)],
        "provenance": prov,
        "seed": seed,
    })
    write_json(run.run_json, record.to_dict())
    return record.to_dict()
