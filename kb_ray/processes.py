"""Process facts from ``/proc`` (Linux): start times, parents and descendants."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def has_proc() -> bool:
    return (PROC / "self" / "stat").exists()


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot; None when it is not running.
    With its pid, it names one process even after the pid is reused."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None else None


def process_start(pid: int) -> int | None:
    """:func:`start_time` where ``/proc`` exists; elsewhere 0 for any live process (a reused
    pid cannot be told apart there) and None for a gone one."""
    if has_proc():
        return start_time(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return 0


def descendants(roots: list[int]) -> set[int]:
    """``roots`` and every process descending from them."""
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                tree.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(tree.get(pid, []))
    return found


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state is [0], ppid [1])."""
    try:
        return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
