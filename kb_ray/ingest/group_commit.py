"""Group commit: the driver commits every micro-batch that arrived while its last commit ran.

The driver commits serially, and each commit costs a few Delta transactions whatever its
size (on local disk delta-rs lists the table's whole ``_delta_log`` directory on every
transaction, so that cost also grows with the number of commits; benchmarks/results/scale.md).
When the workers produce micro-batches faster than the driver commits them, committing
them one by one makes the driver the pipeline's limit. :class:`ReadAhead` pulls the
pipeline's output rows in a thread into a bounded queue; :meth:`ReadAhead.next_group`
waits for one row and takes the rows already waiting with it (at most ``max_group``), which
the committer lands as one micro-batch (:func:`kb_ray.ingest.commit.combine_batches`). A
driver that keeps up commits one micro-batch at a time as before; one that falls behind
commits larger groups, with fewer transactions per document. The queue is bounded, so Ray
Data's backpressure still holds the workers when the driver is behind.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import closing
from typing import Any

_POLL_S = 0.5


class ReadAhead:
    def __init__(self, rows: Iterator[dict[str, Any]], *, max_group: int) -> None:
        self.max_group = max_group
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=2 * max_group)
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(target=self._pull, args=(rows,), name="kb-ray-read-ahead", daemon=True)
        self._thread.start()

    def _pull(self, rows: Iterator[dict[str, Any]]) -> None:
        try:
            for row in rows:
                if not self._put(("row", row)):
                    return
            self._put(("end", None))
        except BaseException as exc:  # handed to the committing thread, which raises it
            self._put(("error", exc))

    def _put(self, item: tuple[str, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def next_group(self) -> list[dict[str, Any]]:
        """The next rows to commit together: waits for one, then takes those already queued.
        An empty list once the pipeline is exhausted; a pipeline error is raised here."""
        group: list[dict[str, Any]] = []
        while not self._ended and len(group) < self.max_group:
            try:
                kind, value = self._queue.get() if not group else self._queue.get_nowait()
            except queue.Empty:
                break
            if kind == "error":
                self._ended = True
                raise value
            if kind == "end":
                self._ended = True
                break
            group.append(value)
        return group

    def close(self) -> None:
        self._stop.set()


def commit_groups(rows: Iterator[dict[str, Any]], *, max_group: int) -> Iterator[list[dict[str, Any]]]:
    """The rows to commit together, in order: with ``max_group`` 1 each row alone, pulled in the
    caller's thread; otherwise through a :class:`ReadAhead` (closed when the caller stops)."""
    if max_group == 1:
        yield from ([row] for row in rows)
        return
    reader = ReadAhead(rows, max_group=max_group)
    with closing(reader):
        while group := reader.next_group():
            yield group
