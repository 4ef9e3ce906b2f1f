"""How catalog writes commit: properties, idempotence and conflict retries.

* Every commit carries the schema version and caller metadata in its commit info, plus
  an app transaction (``app_id``, ``app_version``) when the caller gives one.
* delta-rs records app transactions but never skips a repeated one, so
  :func:`already_committed` is checked before each write.
* Optimistic concurrency: a commit that loses a race raises ``CommitFailedError``;
  :func:`retry_on_conflict` reruns the whole operation (reload, re-check, rewrite) with
  jittered exponential backoff.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError

from kb_ray.catalog import contract
from kb_ray.catalog.datafiles import DataFile
from kb_ray.errors import CatalogError

log = logging.getLogger(__name__)
T = TypeVar("T")


def commit_properties(
    app_id: str | None, app_version: int | None, metadata: dict[str, Any] | None
) -> CommitProperties:
    if (app_id is None) != (app_version is None):
        raise CatalogError("pass app_id and app_version together (or neither)")
    transactions = [Transaction(app_id, app_version)] if app_id is not None else None
    custom = {contract.SCHEMA_VERSION_KEY: contract.schemas().SCHEMA_VERSION, **(metadata or {})}
    return CommitProperties(custom_metadata=custom, app_transactions=transactions)


def already_committed(dt: DeltaTable, app_id: str | None, app_version: int | None) -> bool:
    if app_id is None:
        return False
    done = dt.transaction_version(app_id)
    if done is not None and done >= app_version:
        log.info("skipping %s: app transaction %s already at %s", dt.table_uri, app_id, done)
        return True
    return False


def check_files(table_name: str, files: Sequence[DataFile]) -> None:
    wrong = [f.path for f in files if f.table_name != table_name]
    if wrong:
        raise CatalogError(
            f"files {wrong} were written for another table, not {table_name!r}; commit "
            "each table's files with its own commit_files call"
        )


def retry_on_conflict(operation: Callable[[], T], *, what: str, attempts: int = 10) -> T:
    """Run ``operation``; on a concurrent-commit conflict back off and run it again."""
    for attempt in range(1, attempts + 1):
        try:
            return operation()
        except CommitFailedError as exc:
            if attempt == attempts:
                raise CatalogError(
                    f"{what} failed after {attempts} attempts because of concurrent commits: "
                    f"{exc}. Retry later or reduce the number of concurrent writers"
                ) from exc
            delay = min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())
            log.debug("%s conflicted (attempt %d): %s; retrying in %.2fs", what, attempt, exc, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")
