"""What a test run writes on the filesystem: snapshots of the places a hostile file could
reach (the test's own temporary directory with the sources beside the catalog, /var/tmp, the
home directory, the checkout, /etc), compared before and after, so a test can assert nothing
was written outside the catalog. /tmp as a whole is not watched: whoever runs the tests (a CI
runner, a shell) writes its own files there meanwhile."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import REPO_ROOT

WATCHED = (Path("/var/tmp"), Path.home(), REPO_ROOT, Path("/etc"))
# Trees that only tools write (installers, Ray's own session logs, byte-compiled modules):
NOT_WATCHED = (REPO_ROOT / ".venv", REPO_ROOT / ".git", *(Path.home() / name for name in (
    ".rustup", ".pyenv", ".cargo", ".m2", ".npm")))


def snapshot(*also: Path) -> dict[str, tuple[int, int]]:
    """Every file under the watched places and ``also``: path -> (mtime_ns, size)."""
    skip = {str(path) for path in NOT_WATCHED}
    found: dict[str, tuple[int, int]] = {}
    for root in {str(path) for path in (*WATCHED, *also) if path.is_dir()}:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__" and os.path.join(folder, d) not in skip]
            for name in files:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except OSError:  # gone meanwhile
                    continue
                found[path] = (info.st_mtime_ns, info.st_size)
    return found


def written_outside(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
                    *, allowed: list[Path]) -> list[str]:
    """Files created or changed between the snapshots that lie outside ``allowed``."""
    prefixes = [str(path).rstrip("/") + "/" for path in allowed]
    changed = [path for path, stat in after.items() if before.get(path) != stat]
    return sorted(path for path in changed if not any(path.startswith(prefix) for prefix in prefixes))
