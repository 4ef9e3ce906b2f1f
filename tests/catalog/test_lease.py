"""The catalog writer lease on real Delta tables: one writer at a time, stale holders taken over."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.catalog.contract import table_spec
from kb_ray.catalog.lease import LeaseSettings, WriterLease
from kb_ray.errors import CatalogBusyError, CatalogError
from kb_ray.processes import process_start
from tests.concurrency import race

FAST = LeaseSettings(ttl_s=30, wait_s=60, poll_s=0.05)


@pytest.fixture
def catalog(tmp_path):
    return DeltaCatalog.open(str(tmp_path / "kb"))


def plant(catalog, *, host: str, pid: int, renewed_ago_s: float = 0, ttl_s: float = 30) -> None:
    """A lease row as another writer would have left it."""
    renewed = datetime.now(timezone.utc) - timedelta(seconds=renewed_ago_s)
    catalog.append("leases", pa.Table.from_pylist([{
        "name": "ingest", "token": "theirs", "holder": "ingest run_other", "host": host, "pid": pid,
        "pid_start": process_start(pid), "acquired_at": renewed, "renewed_at": renewed, "ttl_s": ttl_s,
    }], schema=table_spec("leases").schema))


def test_concurrent_writers_hold_the_lease_one_at_a_time(catalog):
    held, lock = [], threading.Lock()

    def write(worker: int) -> None:
        with WriterLease(catalog, holder=f"writer {worker}", settings=FAST):
            start = time.monotonic()
            time.sleep(0.3)
            with lock:
                held.append((start, time.monotonic()))

    assert race(write, writers=3) == []
    spans = sorted(held)
    assert len(spans) == 3
    assert all(earlier[1] <= later[0] for earlier, later in zip(spans, spans[1:]))  # no two overlapped
    assert catalog.read("leases").num_rows == 0  # every lease released


def test_a_live_holder_makes_a_second_writer_wait_then_fail_clearly(catalog):
    plant(catalog, host=__import__("socket").gethostname(), pid=__import__("os").getpid())
    lease = WriterLease(catalog, holder="second", settings=LeaseSettings(ttl_s=30, wait_s=0.3, poll_s=0.05))
    with pytest.raises(CatalogBusyError, match="ingest run_other .* still holds"):
        lease.acquire()


def test_a_holder_process_that_died_on_this_host_is_taken_over_at_once(catalog):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    plant(catalog, host=__import__("socket").gethostname(), pid=int(dead.stdout))
    started = time.monotonic()
    with WriterLease(catalog, holder="rerun", settings=FAST) as lease:
        assert lease.current()["token"] == lease.token
    assert time.monotonic() - started < 10  # not the 30 s ttl


def test_a_lease_on_another_host_is_taken_over_only_after_its_ttl(catalog):
    plant(catalog, host="elsewhere", pid=1, renewed_ago_s=5, ttl_s=30)
    with pytest.raises(CatalogBusyError):
        WriterLease(catalog, holder="early", settings=LeaseSettings(ttl_s=30, wait_s=0.2, poll_s=0.05)).acquire()
    catalog.delete("leases", "token = 'theirs'")
    plant(catalog, host="elsewhere", pid=1, renewed_ago_s=31, ttl_s=30)
    with WriterLease(catalog, holder="late", settings=FAST) as lease:
        assert lease.current()["holder"] == "late"


def test_renewal_keeps_a_long_write_from_going_stale(catalog):
    short = LeaseSettings(ttl_s=0.6, wait_s=0.2, poll_s=0.05)
    with WriterLease(catalog, holder="long", settings=short):
        time.sleep(1.5)  # more than twice the ttl: only renewal keeps it
        with pytest.raises(CatalogBusyError):
            WriterLease(catalog, holder="intruder", settings=short).acquire()


def test_a_lease_taken_over_stops_the_old_holder_from_committing(catalog):
    short = LeaseSettings(ttl_s=0.6, wait_s=5, poll_s=0.05)
    lease = WriterLease(catalog, holder="slow", settings=short)
    lease.acquire()
    try:
        catalog.delete("leases", f"token = '{lease.token}'")  # as a taker does with a stale lease
        plant(catalog, host="elsewhere", pid=1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                lease.check()
            except CatalogError as exc:
                assert "lost" in str(exc)
                break
            time.sleep(0.05)
        else:
            pytest.fail("the lost lease was never noticed")
    finally:
        lease.release()
    assert catalog.read("leases").column("token").to_pylist() == ["theirs"]  # release left the new holder's row
