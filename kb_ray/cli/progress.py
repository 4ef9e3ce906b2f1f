"""How the CLI shows a long ingest: a bar on a terminal, a plain line now and then elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from kb_ray.ingest.progress import IngestProgress


def format_progress(event: IngestProgress) -> str:
    """``ingest: 120/500 files (24%), 830 chunks, 4.1 files/s, ETA 1m33s``."""
    share = f" ({100 * event.files_done / event.files_total:.0f}%)" if event.files_total else ""
    eta = event.eta_s
    return (f"ingest: {event.files_done}/{event.files_total} files{share}, {event.chunks_done} chunks, "
            f"{_rate(event.files_per_s)} files/s, ETA {duration(eta) if eta is not None else '?'}")


def _rate(per_s: float) -> str:
    return f"{per_s:.1f}" if per_s >= 1 else f"{per_s:.2f}"


def duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class ProgressPrinter:
    """Call it with each :class:`IngestProgress`; ``close()`` when the ingest ends."""

    def __init__(self, *, stream: TextIO | None = None, interval_s: float = 10.0, bar: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self.bar = self.stream.isatty() if bar is None else bar
        self._tqdm = None
        self._last_line: float | None = None  # the first event always prints

    def __call__(self, event: IngestProgress) -> None:
        if self.bar:
            self._update_bar(event)
        elif self._due(event):
            self._last_line = time.monotonic()
            print(format_progress(event), file=self.stream, flush=True)

    def _due(self, event: IngestProgress) -> bool:
        last = self._last_line
        return last is None or event.files_done >= event.files_total or time.monotonic() - last >= self.interval_s

    def _update_bar(self, event: IngestProgress) -> None:
        if self._tqdm is None:
            from tqdm import tqdm

            self._tqdm = tqdm(total=event.files_total, unit="file", desc="ingest", file=self.stream,
                              dynamic_ncols=True)
        self._tqdm.update(event.files_done - self._tqdm.n)
        self._tqdm.set_postfix(chunks=event.chunks_done, refresh=True)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
