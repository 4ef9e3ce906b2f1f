"""What a long ingest tells its caller after each committed micro-batch.

The library only reports :class:`IngestProgress` to an optional callback; how it is shown
(a bar on a terminal, plain lines in a log) is the caller's business
(``kb_ray/cli/progress.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class IngestProgress:
    files_done: int
    files_total: int
    chunks_done: int
    elapsed_s: float

    @property
    def files_per_s(self) -> float:
        return self.files_done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (None before the first file)."""
        rate = self.files_per_s
        return (self.files_total - self.files_done) / rate if rate > 0 else None


ProgressCallback = Callable[[IngestProgress], None]
