"""A bound on what one page's pdfium work may allocate in an isolated parser process.

pdfium does not fail an allocation it cannot make: it aborts its process (SIGABRT). Under the
parser process's address-space cap alone (``parse.max_memory_mb``, 4 GiB) a flate bomb, a PDF
stream of 2 MB that inflates to 2 GiB, grew the process to 2.4 GB resident before the abort,
which was reported as ``crashed``. :func:`bounded` lowers that cap, while one page is read,
to the address space in use plus a budget (``parse.pdfium_memory_mb``), and holds the budget
in memory shared with the parent while it does: a process that aborts with a budget held ran
out of it, and the parent reports ``memory_limit`` (kb_ray/parsing/isolation.py).

Outside an isolated parser process (no flag registered) it does nothing: the cap would bound
the whole Ray worker, and an abort there would take the worker with it.
"""

from __future__ import annotations

import contextlib
import os
import resource
from typing import Any, Iterator

_held: Any = None  # the shared budget flag (a ctypes c_longlong) of this isolated parser process


def register(flag: Any) -> None:
    """Called once in the isolated parser process with the flag its parent reads."""
    global _held
    _held = flag


@contextlib.contextmanager
def bounded(budget_bytes: int | None) -> Iterator[None]:
    """Cap the address space at what is in use plus ``budget_bytes`` (never above the
    process's own cap) until the block ends."""
    in_use = _address_space() if budget_bytes and _held is not None else None
    if in_use is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = in_use + budget_bytes if soft == resource.RLIM_INFINITY else min(soft, in_use + budget_bytes)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    _held.value = budget_bytes
    try:
        yield
    finally:
        _held.value = 0
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int | None:
    """This process's virtual memory size in bytes (Linux); None where it cannot be read."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
