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
import io
import sys
import tarfile
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow.parquet as pq

from graphsweep.fileio import copy_file, write_bytes
from graphsweep.store import schema
from graphsweep.store.archive import TABLES, ArchiveError, verify_archive
from graphsweep.store.tables import read_table
from graphsweep.layout import SweepPaths
from graphsweep.fileio import UnusableFile

LIVE = "live"
NOT_SWEEPS = {SweepPaths.ARCHIVES, SweepPaths.JOBS, SweepPaths.RUN_DIRS}  # folders of a sweep that hold no sweep


def _partition(out: Path, table: str, sweep: str, archive: str) -> Path:
    return out / table / f"sweep={sweep}" / f"archive={archive}" / f"{table}.parquet"


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


def add_archive(out: Path, archive: Path) -> list[Path]:
    """Add the tables of one archive (verified first); an archive already in the catalog is left as it is."""
    v = verify_archive(archive)
    if not v.ok:
        raise ArchiveError(f"{archive}: does not verify, not added to the catalog: " + "; ".join(v.problems[:3]))
    man = v.manifest
    sweep = man["sweep"]
    written = []
    with tarfile.open(archive, "r:gz") as tar:
        first = tar.next()
        # the archive's own top folder {sweep}-{timestamp} names it, whatever the file is called now
        stamp = first.name.split("/", 1)[0].removeprefix(f"{sweep}-") if first else "unknown"
        index = _partition(out, "archives", sweep, stamp)
        if index.exists():
            return []
        for m in tar:
            top, _, rel = m.name.partition("/")
            if m.isfile() and rel in TABLES:
                f = tar.extractfile(m)
                dest = _partition(out, rel.removesuffix(".parquet"), sweep, stamp)
                write_bytes(dest, f.read() if f else b"")
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
    for sweep_dir in seen.values():
        written += add_results(out, sweep_dir)
    for archive in sorted(map(Path, archives)):
        written += add_archive(out, archive)
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
        print(f"graphsweep catalog: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except OSError as exc:  # the catalog folder cannot be written (read-only, full, gone)
        print(f"graphsweep catalog: cannot write into {args.out}: {exc.strerror or exc} ({exc.filename or args.out})",
              file=sys.stderr)
        return 2
    print(f"{len(files)} files written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
