"""Office files are ZIP archives: their members are checked before any parser inflates them.

A zip bomb (a few kB that inflate to GBs, or a million members) must fail in milliseconds
with reason ``decompression_bomb``, not after it has filled the parser's memory. The checks
read only the archive's central directory (``zipfile.ZipFile.infolist``): the member count,
each member's and the total declared uncompressed size, and each large member's
compression ratio. Declared sizes can lie; the parser's process still has its memory
limit behind this (kb_ray/parsing/isolation.py).

A member whose name leads outside the archive (``../x``, ``/etc/x``, ``C:\\x``: a "zip slip",
which would write outside the target directory of an extraction) is read by no parser:
nothing here extracts to disk, and the Office libraries open only the parts the package
names. It is not dropped silently either: :func:`check_archive` returns a note naming it
(``unsafe_archive_member``, kb_ray/outcomes.py) for the document's ingest log.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass

from kb_ray.errors import ParseError
from kb_ray.outcomes import NoteCode

_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class ArchiveLimits:
    max_members: int = 10_000
    max_member_bytes: int = 256 << 20
    max_total_bytes: int = 1 << 30
    max_ratio: float = 200.0  # uncompressed / compressed, for members over ``ratio_floor_bytes``
    ratio_floor_bytes: int = 1 << 20


def check_archive(data: bytes, limits: ArchiveLimits = ArchiveLimits()) -> list[str]:
    """Raise ``ParseError("decompression_bomb", ...)`` when the ZIP in ``data`` is over a limit
    (``corrupt`` when it is no ZIP at all); return a note on each member named outside the archive."""
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ParseError("corrupt", f"not a readable ZIP archive: {exc}") from exc
    if len(members) > limits.max_members:
        raise ParseError("decompression_bomb", f"{len(members)} archive members > limit {limits.max_members}")
    total = 0
    for member in members:
        total += member.file_size
        if member.file_size > limits.max_member_bytes:
            raise ParseError("decompression_bomb", f"member {member.filename!r} inflates to {member.file_size} bytes "
                                                   f"> limit {limits.max_member_bytes}")
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > limits.ratio_floor_bytes and ratio > limits.max_ratio:
            raise ParseError("decompression_bomb", f"member {member.filename!r} inflates {ratio:.0f}x "
                                                   f"> limit {limits.max_ratio:.0f}x")
    if total > limits.max_total_bytes:
        raise ParseError("decompression_bomb", f"members inflate to {total} bytes > limit {limits.max_total_bytes}")
    return [f"{NoteCode.UNSAFE_ARCHIVE_MEMBER}: member {member.filename!r} is named outside the archive; not read"
            for member in members if escapes_archive(member.filename)]


def escapes_archive(name: str) -> bool:
    """An absolute name, a drive letter or a ``..`` step: extracted, it lands outside the target."""
    path = name.replace("\\", "/")
    return path.startswith("/") or bool(_DRIVE.match(path)) or ".." in path.split("/")
