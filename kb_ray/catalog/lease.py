"""A catalog-wide writer lease: one ingest (or purge, or maintain) writes at a time.

Two ingests of overlapping sources make the same version ids. Their data commits are
appends, which Delta never checks against each other, so both would land the same rows
(and each would take the other's in-flight rows for a crashed run's residue). The lease
serialises the writers instead: the second run waits for the first and then finds its
documents unchanged.

The lease is a row of the ``leases`` table, taken with an insert-only MERGE on its name
(delta-rs checks concurrent merges, so two takers cannot both land it; see
:meth:`DeltaCatalog.merge_upsert`). It works on every store the catalog runs on (local
disk, S3). A background thread renews it every ``ttl_s / 3``. A lease whose holder is gone
is stale and is taken over: not renewed for ``ttl_s``, or held by a process on this host
that no longer runs (a driver killed with SIGKILL is detected at once, without waiting for
the ttl).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog import contract
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import KbConfig
from kb_ray.errors import CatalogBusyError, CatalogError
from kb_ray.processes import process_start

logger = logging.getLogger(__name__)
TABLE = "leases"


@dataclass(frozen=True)
class LeaseSettings:
    ttl_s: float = 60.0  # a lease not renewed for this long is stale
    wait_s: float = 3600.0  # how long a second writer waits before giving up
    poll_s: float = 1.0  # how often a waiting writer looks again


class WriterLease:
    """``with WriterLease(catalog, holder="ingest run_x"):`` holds the ``ingest`` lease."""

    def __init__(self, catalog: DeltaCatalog, *, holder: str, name: str = "ingest",
                 settings: LeaseSettings | None = None) -> None:
        self.catalog, self.name, self.holder = catalog, name, holder
        self.settings = settings or LeaseSettings()
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._lost: str | None = None

    def __enter__(self) -> WriterLease:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lease, waiting up to ``wait_s`` for a live holder to release it."""
        deadline, waiting_for = time.monotonic() + self.settings.wait_s, None
        while True:
            self.catalog.merge_upsert(TABLE, self._row(), keys=["name"], insert_only=True)
            current = self.current()
            if current is not None and current["token"] == self.token:
                self._start_renewing()
                return
            if current is None:
                continue  # released between our merge and our read
            if is_stale(current, ttl_s=self.settings.ttl_s):
                self._take_over(current)
                continue
            if time.monotonic() > deadline:
                raise CatalogBusyError(f"{describe(current)} still holds the {self.name!r} lease of "
                                       f"{self.catalog.kb_root} after {self.settings.wait_s:.0f}s of waiting")
            if waiting_for != current["token"]:
                logger.warning("waiting for %s to finish writing the catalog", describe(current))
                waiting_for = current["token"]
            time.sleep(self.settings.poll_s)

    def check(self) -> None:
        """Raise when the lease was lost (renewal found another holder): stop writing."""
        if self._lost is not None:
            raise CatalogError(f"the {self.name!r} writer lease was lost ({self._lost}); stopping before "
                               "committing more")

    def release(self) -> None:
        """Give the lease back. A store that fails now (the error that ended the run, often)
        leaves the row behind, stale at once for a rerun on this host, else after its ttl."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=10)
        try:
            self.catalog.delete(TABLE, f"name = '{self.name}' AND token = '{self.token}'")
        except Exception as exc:  # noqa: BLE001 - must not hide the error that ended the write
            logger.warning("could not release the %r lease (%s); it goes stale by itself", self.name, exc)

    def current(self) -> dict[str, Any] | None:
        rows = self.catalog.read(TABLE, filter=pc.field("name") == self.name).to_pylist()
        return rows[0] if rows else None

    def _take_over(self, stale: dict[str, Any]) -> None:
        logger.warning("taking over the %r lease from %s: it is stale (holder gone or not renewed)",
                       self.name, describe(stale))
        self.catalog.delete(TABLE, f"name = '{self.name}' AND token = '{stale['token']}'")

    def _row(self) -> pa.Table:
        now = datetime.now(timezone.utc)
        pid = os.getpid()
        return pa.Table.from_pylist([{"name": self.name, "token": self.token, "holder": self.holder,
                                 "host": socket.gethostname(), "pid": pid, "pid_start": process_start(pid),
                                 "acquired_at": now, "renewed_at": now, "ttl_s": self.settings.ttl_s}],
                                    schema=contract.table_spec(TABLE).schema)

    def _start_renewing(self) -> None:
        self._renewer = threading.Thread(target=self._renew_until_released, name=f"lease-{self.name}", daemon=True)
        self._renewer.start()

    def _renew_until_released(self) -> None:
        while not self._stop.wait(self.settings.ttl_s / 3):
            try:
                metrics = self.catalog.delta_table(TABLE).update(
                    new_values={"renewed_at": datetime.now(timezone.utc)},
                    predicate=f"name = '{self.name}' AND token = '{self.token}'")
            except Exception as exc:  # noqa: BLE001 - a failed renewal is retried at the next tick
                logger.warning("could not renew the %r lease: %s", self.name, exc)
                continue
            if not metrics.get("num_updated_rows"):
                self._lost = "another writer took it over"
                logger.error("the %r writer lease was taken over by another writer", self.name)
                return


def writer_lease(catalog: DeltaCatalog, config: KbConfig, *, holder: str) -> WriterLease:
    """The catalog's ``ingest`` writer lease with the configured wait and ttl."""
    settings = LeaseSettings(ttl_s=config.ingest.lease_ttl_s, wait_s=config.ingest.lease_wait_s)
    return WriterLease(catalog, holder=holder, settings=settings)


def is_stale(row: dict[str, Any], *, ttl_s: float) -> bool:
    """Not renewed within its ttl, or its holder process on this host is gone."""
    renewed = row["renewed_at"]
    if datetime.now(timezone.utc) - renewed > timedelta(seconds=max(ttl_s, row.get("ttl_s") or 0)):
        return True
    if row["host"] != socket.gethostname():
        return False
    start = process_start(row["pid"])
    return start is None or (row.get("pid_start") is not None and start != row["pid_start"])


def describe(row: dict[str, Any]) -> str:
    return f"{row['holder']} (pid {row['pid']} on {row['host']}, since {row['acquired_at']:%H:%M:%S})"
