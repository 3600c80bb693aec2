"""Every file graphsweep writes is written whole or not at all: one helper, one temp-name convention.

A writer puts its bytes into a temp file beside the target (same folder, so the rename stays on one filesystem) and
renames it over the target only once it is complete: a reader, or the next controller after a kill -9, never sees
half a file. The temp name is `.{name}.{pid}-{random}.tmp`: hidden, unique per writer (two processes writing one
file never share a temp file), and ending in `.tmp`, which the archive leaves out (store/archive.py). A writer that
fails removes its temp file. Standard library only (the job side writes through it too).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Iterator, Mapping

TMP_SUFFIX = ".tmp"


def temp_name(path: Path) -> Path:
    """The temp file of one write of `path`."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{TMP_SUFFIX}")


@contextlib.contextmanager
def replacing(path: str | Path, overwrite: bool = True) -> Iterator[Path]:
    """Yields a path that does not exist yet; whatever the block writes there (a file, or a folder) becomes `path`
    when the block ends without an error. `overwrite=False` refuses to replace an existing `path` (FileExistsError;
    an existing file is never touched). A folder replaces an older folder of that name (removed first: the only
    step that is not atomic)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        yield tmp
        if tmp.is_dir() and not tmp.is_symlink():
            if path.exists() and not overwrite:
                raise FileExistsError(path)
            shutil.rmtree(path, ignore_errors=True)
            tmp.rename(path)
        elif overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails when `path` appeared meanwhile: never overwrites
    finally:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def write_bytes(path: str | Path, data: bytes, overwrite: bool = True) -> None:
    with replacing(path, overwrite) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | Path, text: str, overwrite: bool = True) -> None:
    write_bytes(path, text.encode("utf-8"), overwrite)


def write_json(path: str | Path, record: Mapping[str, Any], indent: int | None = 1) -> None:
    """A JSON record (values JSON cannot hold as their text), whole or not at all."""
    write_text(path, json.dumps(record, indent=indent, default=str) + "\n")


def copy_file(src: str | Path, dst: str | Path) -> None:
    """dst becomes a copy of src, whole or not at all."""
    with replacing(dst) as tmp:
        shutil.copyfile(src, tmp)


def link_file(src: str | Path, dst: str | Path) -> None:
    """dst becomes src: a hard link (no copy of a large log), a copy across filesystems."""
    with replacing(dst) as tmp:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)


def link_tree(src: str | Path, dst: str | Path) -> None:
    """dst becomes a copy of the folder src made of hard links (copies across filesystems); an older dst goes."""
    with replacing(dst) as tmp:
        shutil.copytree(src, tmp, copy_function=_link_or_copy)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
