"""The ingest progress lines and bar (no Ray: the printer is called with events directly)."""

from __future__ import annotations

import io

from kb_ray.cli.progress import ProgressPrinter, format_progress
from kb_ray.ingest.progress import IngestProgress


def test_line_has_counts_rate_and_eta():
    line = format_progress(IngestProgress(files_done=120, files_total=500, chunks_done=830, elapsed_s=30.0))
    assert line == "ingest: 120/500 files (24%), 830 chunks, 4.0 files/s, ETA 1m35s"


def test_eta_unknown_before_the_first_file():
    event = IngestProgress(files_done=0, files_total=10, chunks_done=0, elapsed_s=2.0)
    assert event.eta_s is None and format_progress(event).endswith("ETA ?")


def test_plain_lines_are_throttled_but_the_last_one_is_always_printed():
    stream = io.StringIO()
    printer = ProgressPrinter(stream=stream, interval_s=3600, bar=False)
    for done in (10, 20, 30):
        printer(IngestProgress(files_done=done, files_total=30, chunks_done=done * 2, elapsed_s=done / 10))
    lines = stream.getvalue().splitlines()
    assert lines == ["ingest: 10/30 files (33%), 20 chunks, 10.0 files/s, ETA 2s",
                     "ingest: 30/30 files (100%), 60 chunks, 10.0 files/s, ETA 0s"]


def test_bar_on_a_terminal_counts_files():
    stream = io.StringIO()
    printer = ProgressPrinter(stream=stream, bar=True)
    printer(IngestProgress(files_done=5, files_total=8, chunks_done=12, elapsed_s=1.0))
    printer(IngestProgress(files_done=8, files_total=8, chunks_done=20, elapsed_s=2.0))
    assert printer._tqdm.n == 8
    printer.close()
    assert "8/8" in stream.getvalue() and "chunks=20" in stream.getvalue()
