"""Docling parse workers for benchmarks/gpu_parse.py: spawned processes, one shared queue.

Each worker process holds one ``DoclingPdfParser`` with ``isolate=False`` (the same code the
isolated child of the ingest pipeline runs, without its pipe). Per sweep cell the driver
sends the parser settings to every worker; each loads the models (timed), parses one
warm-up document and then pulls corpus indices from the shared task queue, so documents
go to whichever worker is free. Workers are reused across cells of one actor count: a
cell reloads the models, not the imports.
"""

from __future__ import annotations

import gc
import multiprocessing
import queue
import time
from pathlib import Path

import numpy as np
from _gpu_monitor import GpuMonitor

from kb_ray.config import DoclingPdfSettings
from kb_ray.parsing.base import ParseLimits

PDF = "application/pdf"
LIMITS = ParseLimits(max_seconds=120)
PREFETCH = 2  # documents queued per worker


def parse_worker(wid: int, files: list[str], inbox, tasks, results) -> None:
    """One worker process: per cell, load a parser from the settings in ``inbox`` (timed),
    parse one warm-up document, then parse corpus indices from ``tasks`` until a None."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    import torch  # imported here so that "model load" times loading, not imports
    from docling.document_converter import DocumentConverter  # noqa: F401
    from docling.pipeline.standard_pdf_pipeline import StandardPdfPipeline  # noqa: F401

    from kb_ray.parsing.docling_pdf import DoclingPdfParser

    results.put(("started", wid, time.perf_counter() - started, None))
    while (values := inbox.get()) is not None:
        begun = time.perf_counter()
        try:
            parser = DoclingPdfParser(settings=DoclingPdfSettings(**values))
            parser.prepare(limits=LIMITS)
            load_s = time.perf_counter() - begun
            parser.parse(Path(files[0]).read_bytes(), mime=PDF, filename=Path(files[0]).name, limits=LIMITS)
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which stops the sweep
            results.put(("ready", wid, None, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        results.put(("ready", wid, load_s, None))
        while (index := tasks.get()) is not None:
            begun = time.perf_counter()
            result = parser.parse(Path(files[index]).read_bytes(), mime=PDF, filename=Path(files[index]).name,
                                  limits=LIMITS)
            results.put(("doc", wid, (index, time.perf_counter() - begun), result.error))
        results.put(("done", wid, None, None))
        del parser
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


class WorkerPool:
    """``n`` parse workers sharing one task queue; measures one sweep cell at a time. A
    result not arriving before ``deadline`` raises ``queue.Empty`` (the budget ran out)."""

    def __init__(self, n: int, files: list[str], *, deadline: float) -> None:
        context = multiprocessing.get_context("spawn")  # never fork a process that may hold CUDA
        self.n, self.deadline = n, deadline
        self.tasks, self.results = context.Queue(), context.Queue()
        self.inboxes = [context.Queue() for _ in range(n)]
        self.processes = [context.Process(target=parse_worker, args=(i, files, inbox, self.tasks, self.results),
                                          daemon=True) for i, inbox in enumerate(self.inboxes)]
        started = time.perf_counter()
        for process in self.processes:
            process.start()
        try:
            for _ in range(n):
                self._get("started")
        except Exception:
            self.close(kill=True)
            raise
        self.start_s = time.perf_counter() - started  # spawn + imports, before any model loads

    def _get(self, *kinds: str) -> tuple:
        """The next message; ``queue.Empty`` at the deadline, ``RuntimeError`` if a worker died."""
        while True:
            try:
                message = self.results.get(timeout=min(1.0, max(0.01, self.deadline - time.perf_counter())))
                break
            except queue.Empty:
                dead = [p.exitcode for p in self.processes if p.exitcode is not None]
                if dead:
                    raise RuntimeError(f"a docling worker died (exit code {dead[0]})") from None
                if time.perf_counter() >= self.deadline:
                    raise
        assert message[0] in kinds, message
        return message

    def run_cell(self, values: dict, pages: list[int], *, soft_deadline: float, monitor: GpuMonitor) -> dict:
        """Load, warm up, then parse the corpus; after ``soft_deadline`` no new document is
        handed out and the cell is reported as cut (documents in flight still finish)."""
        loading = time.perf_counter()
        for inbox in self.inboxes:
            inbox.put(values)
        ready = [self._get("ready") for _ in range(self.n)]
        if any(m[3] for m in ready):
            return {"error": next(m[3] for m in ready if m[3])}
        started, docs, done, closed = time.perf_counter(), [], 0, False
        queued = min(PREFETCH * self.n, len(pages))
        for index in range(queued):
            self.tasks.put(index)
        while done < self.n:
            kind, _, payload, error = self._get("doc", "done")
            if kind == "done":
                done += 1
                continue
            docs.append((*payload, error))
            if not closed and queued < len(pages) and time.perf_counter() < soft_deadline:
                self.tasks.put(queued)
                queued += 1
            elif not closed:
                for _ in range(self.n):
                    self.tasks.put(None)
                closed = True
        stopped = time.perf_counter()
        return cell_stats(docs, pages, seconds=stopped - started, loads=[m[2] for m in ready],
                          cut=queued < len(pages), gpu=monitor.window(started, stopped),
                          gpu_mem_peak_mib=monitor.window(loading, stopped)["gpu_mem_peak_mib"])

    def close(self, *, kill: bool = False) -> None:
        """Ask the workers to return (or, with ``kill``, do not wait for them), then kill stragglers."""
        for inbox in self.inboxes:
            inbox.put(None)
        for process in self.processes:
            process.join(timeout=0 if kill else 10)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)


def cell_stats(docs: list[tuple], pages: list[int], *, seconds: float, loads: list[float], cut: bool,
               gpu: dict, gpu_mem_peak_mib: float | None) -> dict:
    page_count = sum(pages[index] for index, _, _ in docs)
    latency_ms = [1000 * s / pages[index] for index, s, _ in docs]
    failures = [error for _, _, error in docs if error]
    return {"docs": len(docs), "pages": page_count, "seconds": seconds, "pages_per_s": page_count / seconds,
            "docs_per_s": len(docs) / seconds, "load_s_max": max(loads),
            "page_ms_p50": float(np.percentile(latency_ms, 50)), "page_ms_p95": float(np.percentile(latency_ms, 95)),
            "failures": len(failures), "first_failure": failures[0] if failures else None, "complete": not cut,
            **gpu, "gpu_mem_peak_mib": gpu_mem_peak_mib}
