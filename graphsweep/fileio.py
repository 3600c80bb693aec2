"""Every file graphsweep writes is written whole or not at all: one helper, one temp-name convention.

A writer puts its bytes into a temp file beside the target (same folder, so the rename stays on one filesystem) and
renames it over the target only once it is complete: a reader, or the next controller after a kill -9, never sees
half a file. The temp name is `.{name}.{pid}-{random}.tmp`: hidden, unique per writer (two processes writing one
file never share a temp file), and ending in `.tmp`, which the archive leaves out (store/archive.py). A writer that
fails removes its temp file. Reading back is here too: a file graphsweep reads that is missing or damaged raises
`UnusableFile`, one line with the file, the problem and the fix (`read_text`, `read_json`). Standard library only
(the job side writes through it too).
"""

from __future__ import annotations

import contextlib
import errno
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


# What a write that ran out of room raises: the filesystem is full, the user's quota is, or the file size limit
# (`ulimit -f`, RLIMIT_FSIZE: Python ignores SIGXFSZ, so the write fails with EFBIG) is reached
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class NoRoom(OSError):
    """A file could not be written whole for lack of room; its last version (if any) is untouched. One line: the
    file, why, and what to do."""

    def __init__(self, path: str | Path, cause: OSError):
        self.path = str(path)
        why = {errno.EFBIG: "the file size limit (ulimit -f) is reached",
               errno.EDQUOT: "the disk quota is exhausted"}.get(cause.errno or 0, "no space left on the device")
        super().__init__(cause.errno, f"{path}: cannot be written: {why}; its last good version is kept. Free space "
                         "on its filesystem (or raise the limit, or give another results folder: --config "
                         "results=DIR), then run again")

    def __str__(self) -> str:
        return str(self.strerror)


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
        try:
            yield tmp
        except OSError as exc:  # a writer's own error (pyarrow's, json's): the file it was writing is this one
            if exc.errno in NO_ROOM and not isinstance(exc, NoRoom):
                raise NoRoom(path, exc) from None
            raise
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


# --------------------------------------------------------------------------------------------------
# Files read back: a damaged one is one line (the file, what is wrong, how to go on), never a traceback
class UnusableFile(ValueError):
    """A file graphsweep reads back (a table, a run's record, a guard's record, a side file) cannot be used.

    The message is one line: the file, what is wrong with it, and what to do (`fix`)."""

    def __init__(self, path: str | Path, problem: str, fix: str = ""):
        self.path, self.problem, self.fix = str(path), problem, fix
        super().__init__(f"{path}: {problem}" + (f"; {fix}" if fix else ""))


def read_text(path: str | Path, fix: str = "") -> str:
    """A UTF-8 text file, or UnusableFile saying why not (missing, a folder, unreadable, not UTF-8)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UnusableFile(path, "missing", fix) from None
    except IsADirectoryError:
        raise UnusableFile(path, "is a folder, not a file", fix) from None
    except OSError as exc:
        raise UnusableFile(path, f"cannot be read ({exc.strerror})", fix) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnusableFile(path, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", fix) from None


def read_json(path: str | Path, fix: str = "", required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON object graphsweep wrote, with the keys it must have, or UnusableFile naming the file and the problem."""
    text = read_text(path, fix)
    try:
        record = json.loads(text)
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno}: {exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
        raise UnusableFile(path, f"not valid JSON{where}" if text.strip() else "empty", fix) from None
    if not isinstance(record, dict):
        raise UnusableFile(path, f"holds a JSON {type(record).__name__}, not the object graphsweep writes", fix)
    missing = [k for k in required if k not in record]
    if missing:
        raise UnusableFile(path, f"lacks the key(s) {', '.join(missing)} graphsweep writes", fix)
    return record
