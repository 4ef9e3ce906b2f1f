"""Fault injection helpers shared by tests/ingest/test_faults.py and benchmarks/faults.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.processes import descendants, start_time

WRITES = ("commit_files", "merge_upsert")  # every DeltaCatalog call an ingest commits data through
PARSE_ACTOR, EMBED_ACTOR = "ray::MapWorker(MapBatches(ParseStage))", "ray::MapWorker(MapBatches(EmbedWriteStage))"


@contextlib.contextmanager
def failing_writes(*, from_batch: int, table: str | None = None, error: type[Exception] = OSError) -> Iterator[dict]:
    """While open, DeltaCatalog writes of micro-batch ``from_batch`` on raise ``error`` (only
    those to ``table``, if named): a store that fails where its errors surface. Yields the
    count of refused writes (``{"writes": n}``)."""
    refused = {"writes": 0}
    real = {name: getattr(DeltaCatalog, name) for name in WRITES}

    def failing(name: str):
        def write(self, table_name, *args, **kwargs):
            if kwargs.get("app_version", -1) >= from_batch and table in (None, table_name):
                refused["writes"] += 1
                raise error(f"injected failure writing {table_name}")
            return real[name](self, table_name, *args, **kwargs)
        return write

    for name in WRITES:
        setattr(DeltaCatalog, name, failing(name))
    try:
        yield refused
    finally:
        for name, method in real.items():
            setattr(DeltaCatalog, name, method)


def cli_ingest(*, kb_root: Path, sources: list[Path], config: Path, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """``kb-ray ingest`` as a driver process of its own (it starts its own local Ray)."""
    command = [sys.executable, "-m", "kb_ray.cli", "ingest", "--config", str(config), "--set", f"kb_root={kb_root}",
               "--set", "ingest.micro_batch_docs=2", "--set", "ray.parse.batch_size=2"]
    for source in sources:
        command += ["--source", str(source)]
    for setting in extra:
        command += ["--set", setting]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})


def kill_after_first_batch(driver: subprocess.Popen) -> dict[int, int | None]:
    """SIGKILL the driver once it reports its first committed micro-batch; the processes it had
    started (its Ray instance), as pid -> start time."""
    try:
        wait_for_line(driver, "files (", timeout_s=300)
        started = {pid: start_time(pid) for pid in descendants([driver.pid]) if pid != driver.pid}
        driver.kill()
        driver.wait(timeout=30)
        return started
    finally:
        driver.kill()


def kill_processes_titled(*titles: str) -> list[str]:
    """SIGKILL every process of this test's Ray instance whose title starts with one of
    ``titles``; the titles killed."""
    killed = []
    for pid in descendants([os.getpid()]):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        match = next((t for t in titles if title.startswith(t)), None)
        if match is not None and pid != os.getpid():
            os.kill(pid, signal.SIGKILL)
            killed.append(match)
    return killed


def wait_for_line(process: subprocess.Popen, text: str, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for line in process.stdout:
        if text in line:
            return
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"the driver never printed {text!r} (exit code {process.poll()})")


def wait_until_gone(processes: dict[int, int | None], *, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [pid for pid, started in processes.items() if started is not None and start_time(pid) == started]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)
