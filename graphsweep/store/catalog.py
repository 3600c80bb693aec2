"""A catalog across sweeps and archives: one hive-partitioned folder that a single DuckDB query spans.

Layout (`export`):

    CATALOG/{table}/sweep={sweep}/archive={id}/{table}.parquet     table: plan, runs, iterations, comparison
    CATALOG/archives/sweep={sweep}/archive={id}/archives.parquet   one row per archive: manifest facts

`id` is the archive's UTC timestamp (20261130T104703Z), or `live` for a results/{sweep}/ folder as it is now.
Archives are read straight from their tar.gz after verification (nothing else is extracted); an archive already
in the catalog is skipped, the `live` partitions are replaced. Query all of it with:

    SELECT sweep, archive, verdict, count(*) FROM read_parquet('CATALOG/comparison/*/*/*.parquet',
        hive_partitioning = true, union_by_name = true) GROUP BY ALL
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import tarfile
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow.parquet as pq

from graphsweep.fileio import copy_file, replacing, write_bytes
from graphsweep.store import schema
from graphsweep.store.archive import TABLE_LIMIT, TABLES, ArchiveError, Verification, verify_archive
from graphsweep.store.tables import read_table, table_info
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile
from graphsweep.textsafe import for_terminal

LIVE = "live"
NOT_SWEEPS = {SweepPaths.ARCHIVES, SweepPaths.JOBS, SweepPaths.RUN_DIRS}  # folders of a sweep that hold no sweep


def _partition(out: Path, table: str, sweep: str, archive: str) -> Path:
    """A partition's file, checked to be written inside the catalog: no folder on its way is a link (a planted
    `comparison/sweep=X -> OUTSIDE` would make the catalog write outside it)."""
    dest = out / table / f"sweep={sweep}" / f"archive={archive}" / f"{table}.parquet"
    for folder in (dest.parent.parent.parent, dest.parent.parent, dest.parent):
        if folder.is_symlink():
            raise ArchiveError(f"{folder}: is a symbolic link (to {os.readlink(folder)}): the catalog writes only "
                               f"inside {out}; remove the link")
    return dest


def check_results(sweep_dir: Path) -> None:
    """Every table of a results folder reads back (UnusableFile otherwise): a damaged one is never copied in."""
    for name in TABLES:
        if (sweep_dir / name).is_file():
            read_table(sweep_dir / name, name.removesuffix(".parquet"))


def add_results(out: Path, sweep_dir: Path) -> list[Path]:
    """Copy the tables of one results/{sweep}/ folder into the catalog's `live` partition of that sweep."""
    check_results(sweep_dir)
    written = []
    for name in TABLES:
        src = sweep_dir / name
        if src.is_file():
            dest = _partition(out, name.removesuffix(".parquet"), sweep_dir.name, LIVE)
            copy_file(src, dest)
            written.append(dest)
    return written


def verified(archive: Path) -> Verification:
    """The archive's verification, or ArchiveError naming its first problems."""
    v = verify_archive(archive)
    if not v.ok:
        raise ArchiveError(f"{archive}: does not verify, not added to the catalog: " + "; ".join(v.problems[:3]))
    return v


def add_archive(out: Path, archive: Path, v: Verification | None = None) -> list[Path]:
    """Add the tables of one archive (verified first, or `v`: its verification); an archive already in the catalog is
    left as it is."""
    v = v or verified(archive)
    man = v.manifest
    # the verified manifest names the partition: its sweep, and the time its one top folder agrees with (whatever
    # the file is called now, and whatever else an archive's members are named)
    sweep, stamp = man["sweep"], v.stamp
    listed = {e["path"]: e for e in man["files"]}
    index = _partition(out, "archives", sweep, stamp)
    if index.exists():
        return []
    written = []
    with tarfile.open(archive, "r:gz") as tar:
        for m in tar:
            rel = m.name.removeprefix(f"{v.top}/")
            if m.isfile() and m.name == f"{v.top}/{rel}" and rel in TABLES:
                dest = _partition(out, rel.removesuffix(".parquet"), sweep, stamp)
                _unpack(tar, m, dest, listed[rel], archive)
                written.append(dest)
    pipe = man.get("pipeline") or {}
    row = {
        "sweep": sweep, "archive_file": str(Path(archive).resolve()), "created_utc": man.get("created_utc"),
        "graphsweep_version": pipe.get("version"), "graphsweep_sha": pipe.get("git_sha"),
        "graphsweep_dirty": pipe.get("git_dirty"), "schema_version": man.get("schema_version"),
        "spec_hash": (man.get("spec") or {}).get("hash"), "logs_included": man.get("logs_included"),
        "margin": (man.get("analysis") or {}).get("margin"), "files": len(man.get("files", [])),
    }  # fmt: skip
    buf = io.BytesIO()
    pq.write_table(schema.to_arrow(pd.DataFrame([row]), "archives"), buf)
    write_bytes(index, buf.getvalue())  # written last: its presence means the archive is fully in
    return [*written, index]


def _unpack(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, entry: dict, archive: Path) -> None:
    """One table of a verified archive into its partition, streamed (never whole in memory, never more than
    TABLE_LIMIT), and kept only when it is the file the manifest lists (the archive may have changed since it was
    verified) and a Parquet table of that name (its footer read back: a listed run of zeros is no table)."""
    f = tar.extractfile(member)
    digest, size = hashlib.sha256(), 0
    name = dest.name.removesuffix(".parquet")
    with replacing(dest) as tmp:
        with open(tmp, "wb") as out:
            for block in iter(lambda: f.read(1 << 20), b"") if f else ():
                size += len(block)
                if size > TABLE_LIMIT:
                    break
                digest.update(block)
                out.write(block)
        if (size, digest.hexdigest()) != (entry.get("bytes"), entry.get("sha256")):
            raise ArchiveError(f"{archive}: {member.name} changed since it was verified (its sha256 or size is not "
                               "the manifest's): verify it again (graphsweep verify-archive)")
        try:
            table = table_info(tmp)["table"]
        except UnusableFile as exc:
            raise ArchiveError(f"{archive}: {member.name}: {exc.problem}") from None
        if table != name:
            raise ArchiveError(f"{archive}: {member.name} is not graphsweep's {name} table")


def sweep_dirs(root: Path) -> list[Path]:
    """Every sweep folder under a results root, at any depth (results/default, results/examples/h200-builtin), by
    its comparison.parquet; archives and job plumbing are not looked into."""
    found = [p.parent for p in root.rglob(SweepPaths.COMPARISON)
             if not (NOT_SWEEPS & set(p.relative_to(root).parts[:-1]))]
    return sorted(found)


def export(out: str | Path, results: Iterable[str | Path] = (), archives: Iterable[str | Path] = ()) -> list[Path]:
    """Catalog every sweep under each results root and every archive given."""
    out = Path(out)
    written: list[Path] = []
    seen: dict[str, Path] = {}
    for root in map(Path, results):
        for sweep_dir in sweep_dirs(root):
            if sweep_dir.name in seen:  # the catalog's partitions are by sweep name
                raise ArchiveError(f"{seen[sweep_dir.name]} and {sweep_dir} are both sweep '{sweep_dir.name}': "
                                   "catalog them into separate catalogs (one --results root each)")
            seen[sweep_dir.name] = sweep_dir
            check_results(sweep_dir)  # all of them before the first file is written
    # every archive verified before the first file is written
    checked = {archive: verified(archive) for archive in sorted(map(Path, archives))}
    for sweep_dir in seen.values():
        written += add_results(out, sweep_dir)
    for archive, v in checked.items():
        written += add_archive(out, archive, v)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m graphsweep.store.catalog", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("out", help="catalog folder (created)")
    p.add_argument("--results", nargs="*", default=[], help="results roots (each holds {sweep}/ folders)")
    p.add_argument("--archives", nargs="*", default=[], help="archive files (*.tar.gz) to add")
    args = p.parse_args(argv)
    archives = list(args.archives)
    for root in args.results:  # the archives kept next to the results come along
        archives += [str(a) for a in sorted(Path(root).rglob("archive/*.tar.gz"))]
    try:
        files = export(args.out, args.results, archives)
    except (ArchiveError, UnusableFile) as exc:
        print(for_terminal(f"graphsweep catalog: {' '.join(str(exc).split())}"), file=sys.stderr)
        return 2
    except OSError as exc:  # the catalog folder cannot be written (read-only, full, gone)
        print(for_terminal(f"graphsweep catalog: cannot write into {args.out}: {exc.strerror or exc} "
                           f"({exc.filename or args.out})"), file=sys.stderr)
        return 2
    print(for_terminal(f"{len(files)} files written to {args.out}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
