"""Reading a log file as bytes: is it text at all, its content in blocks of whole lines (for the vectorised scan
of graphsweep/parse/scan.py), and one line of it by number."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator


def binary_reason(head: bytes) -> str | None:
    """Why the first bytes of a file say it is no text log (NUL or control bytes), or None."""
    if not head:
        return None
    nul = head.count(b"\x00")
    if nul > max(8, len(head) // 1000):
        return f"binary file ({nul} NUL bytes in the first {len(head)} bytes)"
    ctrl = sum(head.count(bytes([c])) for c in range(1, 32) if c not in (9, 10, 13, 27))
    if ctrl > len(head) // 10:
        return f"binary file ({ctrl} control bytes in the first {len(head)} bytes)"
    return None


class LineTooLong(ValueError):
    """A line longer than eight blocks: the block reader leaves such a file to the line loop."""


def blocks(path: Path, size: int) -> Iterator[bytes]:
    """The file in blocks of whole lines of about `size` bytes (the last block may end mid-line)."""
    carry = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(size)
            if not block:
                if carry:
                    yield carry
                return
            data = carry + block if carry else block
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry = data
                if len(carry) > 8 * size:
                    raise LineTooLong(f"line longer than {8 * size >> 20} MiB")
                continue
            if cut == len(data):
                carry = b""
                yield data
            else:
                carry = data[cut:]
                yield data[:cut]


def read_line(path: Path | str, lineno: int, size: int = 1 << 24) -> bytes:
    """Line `lineno` (1-based) of the file, found by counting newlines a block at a time; b"" past its end."""
    before = lineno - 1  # newlines before the line
    with open(path, "rb") as f:
        offset = 0
        while before:
            block = f.read(size)
            if not block:
                return b""
            n = block.count(b"\n")
            if n < before:
                before, offset = before - n, offset + len(block)
                continue
            at = -1
            for _ in range(before):
                at = block.index(b"\n", at + 1)
            offset, before = offset + at + 1, 0
        f.seek(offset)
        return f.readline()
