"""Run one operation from several threads at the same moment, for concurrency tests."""

from __future__ import annotations

import threading
from collections.abc import Callable


def race(operation: Callable[[int], object], *, writers: int = 4, timeout_s: float = 120) -> list[BaseException]:
    """Start ``writers`` threads behind a barrier, each calling ``operation(worker)``;
    return the exceptions they raised (empty when all succeeded)."""
    barrier, errors = threading.Barrier(writers), []

    def run(worker: int) -> None:
        barrier.wait()
        try:
            operation(worker)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(worker,)) for worker in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout_s)
    return errors
