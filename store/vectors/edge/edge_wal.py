"""Reading a Qdrant Edge shard's write-ahead log from its files: where it ends.

A shard numbers every update with the index of its entry in the write-ahead log
(``wal/``), and each segment of points records the highest number it has applied
(``segments/*/segment.json``, ``"version"``). A point ignores an update whose number
is not above its own: that is how replaying the log after a crash is idempotent. When
the log loses its last entries while the segments were already flushed past them (a
torn write, a disk fault, a file cut), new updates take numbers the segments have
seen, and every update of a point written since is *silently dropped*: a changed
document keeps its old ``doc_hash``, a committed point its pending marker.

:func:`wal_behind` tells, from the files alone, whether a shard is in that state; the
store then rebuilds the shard from its points (:mod:`~ingestd.store.vectors.edge.edge_heal`).

The log's format is that of Qdrant's ``wal`` crate (``src/segment.rs``, ``src/lib.rs``
of github.com/qdrant/wal): files ``open-<id>`` and ``closed-<first index>``, each an
8-byte header (``wal``, a format byte 0, a little-endian u32 CRC seed) followed by
entries (u64 length, data, 0-7 bytes of padding, CRC32-C of the length, data and
padding, chained from the previous entry's CRC). Parsing stops at the first entry whose
CRC does not match, as the crate's does.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from pathlib import Path

__all__ = ["crc32c_append", "segments_version", "wal_behind", "wal_end", "wal_last_index"]

_HEADER = 8
_CRC = 4
_MAGIC = b"wal"


def crc32c_append(crc: int, data: bytes) -> int:
    """CRC-32C of ``data`` continuing from ``crc`` (the ``crc32c`` crate's ``crc32c_append``).

    Computed by ``google-crc32c`` (C, hardware-accelerated where the CPU allows):
    ``crc32c_append(0, b"123456789") == 0xE3069283``, the CRC-32C check value.
    """
    import google_crc32c

    return int(google_crc32c.extend(crc, data))


def _reverse_bits(x: int) -> int:
    return int(f"{x:032b}"[::-1], 2)


def _entries(path: Path) -> tuple[int, int] | None:
    """``(valid entries, CRC of the last)`` of one log segment file, or ``None`` (damage).

    The CRC is the chained CRC-32C the last valid entry stores (the file's seed when it
    holds none): it covers every entry before it. The file is mapped, not read: a
    segment is preallocated (32 MiB), and only the pages of its entries are touched.
    """
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _HEADER:
                return None
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _count(data, size)
    except (OSError, ValueError):
        return None


def _count(data: mmap.mmap, size: int) -> tuple[int, int] | None:
    if data[:3] != _MAGIC or data[3] != 0:
        return None
    capacity = size & ~7
    (crc,) = struct.unpack_from("<I", data, 4)
    offset, count = _HEADER, 0
    while offset + _HEADER + _CRC < capacity:
        (length,) = struct.unpack_from("<Q", data, offset)
        padded = length + ((4 - length) & 7)
        end = offset + _HEADER + padded
        if end + _CRC > capacity:
            break
        want = crc32c_append(~_reverse_bits(crc) & 0xFFFFFFFF, data[offset:end])
        (stored,) = struct.unpack_from("<I", data, end)
        if want != stored:
            break
        crc, count, offset = want, count + 1, end + _CRC
    return count, crc


def wal_end(wal: Path) -> tuple[int, int] | None:
    """``(index of the last entry, its CRC)`` of the log in folder ``wal``, or ``None``.

    The index is ``-1`` when the log holds no entry. The CRC chains through every entry
    of its segment file (see :func:`_entries`), so an equal pair after a clean close
    proves the log lost nothing and gained nothing. ``None`` when a segment file cannot
    be read as one (the engine reports that damage itself when it loads the shard).
    """
    closed: list[tuple[int, Path]] = []
    opened: list[tuple[int, Path]] = []
    for f in wal.glob("*"):
        kind, _, number = f.name.partition("-")
        if not number.isdigit():
            continue
        if kind == "closed":
            closed.append((int(number), f))
        elif kind == "open":
            opened.append((int(number), f))
    closed.sort()
    next_index = closed[0][0] if closed else 0
    crc = 0
    for _start, f in [*closed, *sorted(opened)]:
        got = _entries(f)
        if got is None:
            return None
        n, last_crc = got
        if n:
            next_index, crc = next_index + n, last_crc
    return next_index - 1, crc


def wal_last_index(wal: Path) -> int | None:
    """Index of the last entry of the log in folder ``wal`` (``-1``: none), or ``None``.

    ``None`` when a segment file cannot be read as one (the engine reports that damage
    itself when it loads the shard).
    """
    end = wal_end(wal)
    return None if end is None else end[0]


def segments_version(shard: Path) -> int | None:
    """The highest update number the shard's segments have applied, or ``None`` (none)."""
    best: int | None = None
    for f in shard.glob("segments/*/segment.json"):
        try:
            version = json.loads(f.read_bytes()).get("version")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(version, int) and (best is None or version > best):
            best = version
    return best


def wal_behind(shard: Path) -> tuple[int, int] | None:
    """``(last log index, segments' version)`` when the log ends before the segments.

    Then the shard drops updates silently (see the module docstring); ``None`` when
    the log reaches the segments' version, or when either cannot be read.
    """
    version = segments_version(shard)
    if version is None:
        return None
    last = wal_last_index(shard / "wal")
    if last is None or last >= version:
        return None
    return last, version
