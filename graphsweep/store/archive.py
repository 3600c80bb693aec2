"""Archive a sweep as one self-describing tar.gz, and verify such an archive anywhere.

`results/{sweep}/archive/{sweep}-{UTC timestamp}.tar.gz` holds, under one top folder `{sweep}-{timestamp}/`:
the Parquet tables, the spec as given (`spec.yaml`), the plan, every run record (config.yaml, run.json,
summary.json, iterations.parquet), the reports, the logs (run logs and rule logs; leave them out with
include_logs=False) and `manifest.json`: every file with its sha256 and size, the pipeline version and commit,
the table schema version, the spec hash and the analysis settings (margin, pairing) - everything needed to
re-derive the verdicts (anchors idea 20). An existing archive is never overwritten.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from graphsweep import __version__, resources
from graphsweep.fileio import TMP_SUFFIX, replacing
from graphsweep.provenance import git_state
from graphsweep.store.tables import SCHEMA_VERSION, table_info
from graphsweep.layout import RunDir, SweepPaths

MANIFEST = "manifest.json"
FORMAT = "graphsweep-archive"
MANIFEST_VERSION = 1
SPEC = "spec.yaml"  # the spec as given, inside the archive
TABLES = SweepPaths.TABLES
REQUIRED = (*TABLES, SweepPaths.REPORT_MD, SPEC)
SKIP_DIRS = {SweepPaths.ARCHIVES, SweepPaths.JOBS}  # earlier archives; submitit pickles (job plumbing, not results)
SKIP_FILES = {SweepPaths.rule_log_name("archive")}  # the archive rule's own log is being written while it archives
# The files verify reads into memory, and the most each may hold: a manifest lists ~200 bytes per file (195 in an
# archive of results/examples/h200-builtin: 232 files, 5 per run), so 128 MiB is ~670,000 files, over 30 for each run
# of a sweep of max_runs (20,000) runs; a spec is a few KB. A bigger member is refused unread.
READ_LIMITS = {MANIFEST: 128 << 20, SPEC: 16 << 20}
# The most a table of an archive may hold, as the catalog unpacks each one: runs.parquet takes ~1.7 KB a run
# (results/examples: 78 KB for 45 runs), so a sweep of max_runs (20,000) runs has ~35 MB; 256 MiB is seven times that.
# A bigger member is refused unread, before the catalog writes a byte of it.
TABLE_LIMIT = 256 << 20
PARQUET_MAGIC = b"PAR1"  # the first and last four bytes of every Parquet file (the format's header and footer)
# What a manifest names that becomes a path (the catalog's sweep={sweep}/archive={stamp} partitions): a sweep name
# as the spec schema allows it, and the archive's top folder {sweep}-{UTC timestamp} as make_archive writes it
SWEEP_NAME = re.compile(yaml.safe_load(resources.read_text(resources.SWEEP_SCHEMA))["properties"]["sweep"]["pattern"])
STAMP = re.compile(r"\d{8}T\d{6}Z")


class ArchiveError(RuntimeError):
    pass


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def spec_hash(text: str) -> str:
    """sha256 of the spec's content (parsed YAML as canonical JSON): comments and key order do not change it."""
    return sha256_bytes(json.dumps(yaml.safe_load(text), sort_keys=True, default=str).encode())


def is_log(rel: PurePosixPath) -> bool:
    """Logs: rule logs (logs/), run logs (runs/*/log.txt, runs/*/ranks/*); the 'logs' switch leaves these out."""
    parts = rel.parts
    return parts[0] == SweepPaths.LOGS or (parts[0] == SweepPaths.RUN_DIRS
                                           and (rel.name == RunDir.LOG or RunDir.RANKS in parts[2:3]))


def sweep_files(sweep_dir: Path, include_logs: bool = True) -> list[tuple[PurePosixPath, Path]]:
    """(path inside the archive, file) for everything of a sweep worth keeping, in a stable order."""
    out = []
    for path in sorted(sweep_dir.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = PurePosixPath(path.relative_to(sweep_dir).as_posix())
        if rel.parts[0] in SKIP_DIRS or str(rel) in SKIP_FILES or rel.name.endswith(TMP_SUFFIX) or rel.name == MANIFEST:
            continue
        if not include_logs and is_log(rel):
            continue
        out.append((rel, path))
    return out


def _parquet_meta(path: Path) -> dict[str, Any]:
    try:
        info = table_info(path)
        return {"table": info["table"], "schema_version": info["schema_version"]}
    except Exception as exc:  # noqa: BLE001 - recorded; verify reports it
        return {"error": f"{type(exc).__name__}: {exc}"}


def _analysis(sweep_dir: Path) -> dict[str, Any]:
    """margin / pairing as the comparison used them (comparison.parquet metadata)."""
    try:
        return dict(table_info(sweep_dir / SweepPaths.COMPARISON)["extra"] or {})
    except Exception:  # noqa: BLE001
        return {}


def build_manifest(sweep: str, stamp: str, files: list[tuple[PurePosixPath, Path]], spec_text: str,
                   spec_path: str, include_logs: bool, sweep_dir: Path) -> dict[str, Any]:  # fmt: skip
    entries = []
    for rel, path in files:
        e: dict[str, Any] = {"path": str(rel), "sha256": sha256_file(path), "bytes": path.stat().st_size}
        if rel.suffix == ".parquet":
            e.update(_parquet_meta(path))
        entries.append(e)
    spec_bytes = spec_text.encode()
    entries.append({"path": SPEC, "sha256": sha256_bytes(spec_bytes), "bytes": len(spec_bytes)})
    repo = resources.checkout()  # an installed graphsweep: no commit to record
    return {
        "format": FORMAT,
        "manifest_version": MANIFEST_VERSION,
        "sweep": sweep,
        "created_utc": stamp,
        "pipeline": {"name": "graphsweep", "version": __version__, **(git_state(repo) if repo else {})},
        "schema_version": SCHEMA_VERSION,
        "spec": {"path": spec_path, "hash": spec_hash(spec_text), "sha256": sha256_bytes(spec_bytes)},
        "analysis": _analysis(sweep_dir),
        "logs_included": include_logs,
        "files": entries,
    }


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(mtime), 0o644
    tar.addfile(info, io.BytesIO(data))


def make_archive(sweep_dir: str | Path, spec_path: str | Path, include_logs: bool = True,
                 now: dt.datetime | None = None) -> Path:  # fmt: skip
    """Write results/{sweep}/archive/{sweep}-{UTC timestamp}.tar.gz; refuse to replace an existing file."""
    sweep_dir = Path(sweep_dir)
    missing = [n for n in TABLES if not (sweep_dir / n).is_file()]
    if missing:
        raise ArchiveError(f"{sweep_dir}: {', '.join(missing)} missing; run the workflow (snakemake) before archiving")
    sweep = sweep_dir.name
    now = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    top = f"{sweep}-{stamp}"
    dest = SweepPaths.of(sweep_dir).archive(top)
    if dest.exists():
        raise ArchiveError(f"{dest} exists; archives are never overwritten (run again in a second for a new name)")
    spec_text = Path(spec_path).read_text()
    files = sweep_files(sweep_dir, include_logs)
    manifest = build_manifest(sweep, now.isoformat(timespec="seconds"), files, spec_text, str(spec_path),
                              include_logs, sweep_dir)  # fmt: skip
    try:
        with replacing(dest, overwrite=False) as tmp, tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, f"{top}/{MANIFEST}", json.dumps(manifest, indent=1).encode() + b"\n", now.timestamp())
            _add_bytes(tar, f"{top}/{SPEC}", spec_text.encode(), now.timestamp())
            for rel, path in files:
                tar.add(path, arcname=f"{top}/{rel}", recursive=False)
    except FileExistsError:
        raise ArchiveError(f"{dest} exists; archives are never overwritten") from None
    return dest


# --------------------------------------------------------------------------------------------------
# Verify


@dataclass
class Verification:
    path: str
    manifest: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    checked: int = 0  # files whose sha256 matched
    top: str = ""  # the archive's one top folder, {sweep}-{stamp}, as verified against the manifest

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def stamp(self) -> str:
        """The archive's UTC time stamp (20261130T104703Z): its top folder's, which the manifest's time agrees with."""
        return self.top.removeprefix(f"{self.manifest.get('sweep')}-")


def stamp_of(created_utc: Any) -> str | None:
    """The top folder's time stamp `make_archive` writes for a manifest's created_utc (None: not such a time)."""
    try:
        when = dt.datetime.fromisoformat(str(created_utc))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


class _Member:
    """One regular member as verify streams it: its size and sha256, the first and last bytes (a table's Parquet
    magic), and its whole text when it is a file verify reads (READ_LIMITS)."""

    def __init__(self, keep: bool):
        self.hash, self.size = hashlib.sha256(), 0
        self.head, self.tail = b"", b""
        self.text = bytearray() if keep else None

    def add(self, block: bytes) -> None:
        self.hash.update(block)
        self.size += len(block)
        if len(self.head) < 4:
            self.head = (self.head + block)[:4]
        self.tail = (self.tail + block)[-4:]
        if self.text is not None:
            self.text.extend(block)


def _safe(name: str) -> bool:
    """A member name that is one relative path, spelled one way: not absolute, no '..', no './' or '//' (two
    spellings of one path would be two members for verify and one file for a tar tool)."""
    p = PurePosixPath(name)
    return not p.is_absolute() and ".." not in p.parts and str(p) == name.rstrip("/")


def verify_archive(path: str | Path) -> Verification:
    """Check an archive: manifest present, every file listed with the right sha256 and size and nothing unlisted,
    spec hash, required files, Parquet schema versions readable by this graphsweep, no unsafe member names."""
    v = Verification(str(path))
    try:
        tar = tarfile.open(path, "r:gz")
    except (OSError, tarfile.TarError) as exc:
        v.problems.append(f"not a readable tar.gz: {exc}")
        return v
    with tar:
        members: dict[str, tuple[int, str]] = {}  # path -> (bytes, sha256), hashed while streaming
        kept: dict[str, bytearray] = {}  # the small files read again below (READ_LIMITS bounds them)
        not_parquet: list[str] = []
        tops = set()
        try:
            for m in tar:
                if not _safe(m.name):
                    v.problems.append(f"unsafe member name {m.name!r} (absolute, '..', or not spelled as one path)")
                    continue
                top, _, rel = m.name.rstrip("/").partition("/")
                tops.add(top)  # a folder's top too: one top folder names the archive, and the catalog's partition
                if m.isdir():
                    continue
                if not m.isfile():
                    v.problems.append(f"{m.name}: not a regular file (links are not allowed)")
                    continue
                if rel in members:  # tar keeps both, and which one a reader takes depends on the reader
                    v.problems.append(f"{rel}: in the archive twice: every file of a graphsweep archive is in it once")
                    continue
                limit = READ_LIMITS.get(rel, TABLE_LIMIT if rel in TABLES else None)
                if limit is not None and m.size > limit:
                    v.problems.append(f"{rel}: {m.size:,} bytes, more than a {rel} of a graphsweep archive holds "
                                      f"({limit:,}): not read")
                    return v
                f = tar.extractfile(m)
                seen = _Member(keep=rel in READ_LIMITS)
                for block in iter(lambda: f.read(1 << 20), b"") if f else ():
                    seen.add(block)
                members[rel] = (seen.size, seen.hash.hexdigest())
                if seen.text is not None:
                    kept[rel] = seen.text
                if rel.endswith(".parquet") and (seen.head, seen.tail) != (PARQUET_MAGIC, PARQUET_MAGIC):
                    not_parquet.append(rel)
        except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
            v.problems.append(f"archive is truncated or corrupt: {exc}")
            return v
        v.problems += [f"{rel}: not a Parquet file (it neither starts nor ends with {PARQUET_MAGIC.decode()})"
                       for rel in not_parquet]
        if len(tops) != 1:
            v.problems.append(f"expected one top folder, found {sorted(tops)}")
        if MANIFEST not in members:
            v.problems.append(f"no {MANIFEST}: not a graphsweep archive")
            return v
        try:
            v.manifest = json.loads(bytes(kept.get(MANIFEST, b"")))
        except ValueError as exc:
            v.problems.append(f"{MANIFEST} is not JSON: {exc}")
            return v
    if not isinstance(v.manifest, dict):
        v.problems.append(f"{MANIFEST} holds a JSON {type(v.manifest).__name__}, not a manifest's object")
        v.manifest = {}
        return v
    man = v.manifest
    files, version = man.get("files", []), man.get("manifest_version", 0)
    if not (isinstance(files, list) and all(isinstance(e, dict) and isinstance(e.get("path"), str) for e in files)
            and isinstance(version, int) and isinstance(man.get("spec") or {}, dict)):
        v.problems.append(f"{MANIFEST}: not the manifest `snakemake archive` writes (files, manifest_version, spec)")
        return v
    sweep = man.get("sweep")
    if not isinstance(sweep, str) or not SWEEP_NAME.fullmatch(sweep):
        # it names the catalog's folders: '../x' would write outside the catalog
        v.problems.append(f"{MANIFEST}: sweep {sweep!r} is not a sweep name (letters, digits, '-', '_' and '.', "
                          "starting with a letter or digit)")
    elif len(tops) == 1:
        (v.top,) = tops
        stamp = stamp_of(man.get("created_utc"))
        if not (v.top.startswith(f"{sweep}-") and STAMP.fullmatch(v.stamp)):
            v.problems.append(f"top folder {v.top!r} is not '{sweep}-<UTC timestamp>' (the archive's sweep and "
                              "time, as `snakemake archive` names it)")
        elif stamp != v.stamp:
            v.problems.append(f"{MANIFEST}: created_utc {man.get('created_utc')!r} is not the time of the top folder "
                              f"{v.top!r}: an archive is named by the time it was made")
    if man.get("format") != FORMAT:
        v.problems.append(f"{MANIFEST}: format is {man.get('format')!r}, expected {FORMAT!r}")
    if int(man.get("manifest_version", 0)) > MANIFEST_VERSION:
        v.problems.append(f"manifest version {man.get('manifest_version')} is newer than this graphsweep reads "
                          f"({MANIFEST_VERSION}): upgrade graphsweep")  # fmt: skip
    listed = {e["path"]: e for e in man.get("files", [])}
    for rel, e in listed.items():
        got = members.get(rel)
        if got is None:
            v.problems.append(f"{rel}: listed in the manifest but missing from the archive")
        elif got != (e.get("bytes"), e.get("sha256")):
            v.problems.append(f"{rel}: sha256/size differ from the manifest (file changed or corrupt)")
        else:
            v.checked += 1
    for rel in sorted(set(members) - set(listed) - {MANIFEST}):
        v.problems.append(f"{rel}: in the archive but not in the manifest")
    for rel in REQUIRED:
        if rel not in members:
            v.problems.append(f"{rel}: required file missing")
    if SPEC in members:
        try:
            if spec_hash(bytes(kept.get(SPEC, b"")).decode()) != (man.get("spec") or {}).get("hash"):
                v.problems.append("spec.yaml: its hash differs from the manifest's spec hash")
        except (ValueError, yaml.YAMLError) as exc:
            v.problems.append(f"spec.yaml: not readable YAML: {exc}")
    for rel, e in listed.items():
        if rel.endswith(".parquet") and rel in members:
            version = e.get("schema_version")
            if e.get("error") or not isinstance(version, int):
                v.problems.append(f"{rel}: unreadable Parquet metadata when archived ({e.get('error')})")
            elif version > SCHEMA_VERSION:
                v.problems.append(f"{rel}: table schema version {version} is newer than this graphsweep reads "
                                  f"({SCHEMA_VERSION}): upgrade graphsweep")  # fmt: skip
    if not man.get("logs_included", True) and any(is_log(PurePosixPath(r)) for r in listed):
        v.problems.append("manifest says logs were left out but log files are listed")
    return v


def safe_extract(path: str | Path, dest: str | Path) -> Path:
    """Extract a verified archive into dest (regular files only, no links, no paths outside); returns its folder."""
    v = verify_archive(path)
    if not v.ok:
        raise ArchiveError(f"{path}: does not verify: " + "; ".join(v.problems[:5]))
    dest = Path(dest)
    with tarfile.open(path, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
        tar.extractall(dest, members=members, filter="data")
        top = members[0].name.split("/", 1)[0]
    return dest / top
