"""A point in time → the version of each catalog table at that time, from the Delta log.

Delta versions are per table; a timestamp is the one point they share. The version of a
table at ``when`` is its newest commit whose commit-info ``timestamp`` (milliseconds, written
by the committer) is at or before ``when``; a table with no commit that early has none (it did
not exist yet, or vacuum and log clean-up took its early history). ``CommitTimeline`` keeps
each table's (version, timestamp) list and reads the history again only when the table has a
new version, so resolving many points costs one log read per table change.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from datetime import datetime, timezone

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.errors import CatalogError


def parse_timestamp(text: str | datetime) -> datetime:
    """An ISO-8601 timestamp as an aware datetime (no offset: UTC); CatalogError when it is not one."""
    if isinstance(text, datetime):
        moment = text
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except (ValueError, AttributeError) as exc:
            raise CatalogError(f"{text!r} is not an ISO-8601 timestamp (e.g. 2026-01-31T12:00:00Z)") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def parse_point(text: str) -> int | datetime:
    """A CLI ``--as-of`` value: digits are a version number, anything else an ISO-8601 timestamp."""
    text = text.strip()
    return int(text) if text.isdigit() else parse_timestamp(text)


def versions_at_time(catalog: DeltaCatalog, when: datetime, table_names: Iterable[str]) -> dict[str, int]:
    """Each table's version at ``when``; a table with no commit that early is read at version 0
    (its creation: no rows). CatalogError when no table has a commit that early."""
    found = CommitTimeline(catalog).versions_at(table_names, when)
    if all(version is None for version in found.values()):
        raise CatalogError(f"the catalog has no history at {parse_timestamp(when).isoformat()}: pick a later time")
    return {name: 0 if version is None else version for name, version in found.items()}


class CommitTimeline:
    """Commit timestamps of a catalog's tables; safe to share across threads."""

    def __init__(self, catalog: DeltaCatalog) -> None:
        self.catalog = catalog
        self._lock = threading.Lock()
        self._tables: dict[str, tuple[int, list[int], list[int]]] = {}  # name -> (latest, timestamps, versions)

    def version_at(self, table_name: str, when: datetime) -> int | None:
        """The table's version at ``when``, or None when it has no commit that early."""
        _, stamps, versions = self._timeline(table_name)
        position = bisect.bisect_right(stamps, int(parse_timestamp(when).timestamp() * 1000))
        return versions[position - 1] if position else None

    def versions_at(self, table_names: Iterable[str], when: datetime) -> dict[str, int | None]:
        return {name: self.version_at(name, when) for name in table_names}

    def _timeline(self, table_name: str) -> tuple[int, list[int], list[int]]:
        latest = self.catalog.delta_table(table_name).version()
        with self._lock:
            known = self._tables.get(table_name)
            if known is None or known[0] != latest:
                known = self._tables[table_name] = (latest, *_read_history(self.catalog, table_name))
            return known


def _read_history(catalog: DeltaCatalog, table_name: str) -> tuple[list[int], list[int]]:
    """(timestamps, versions) sorted by version; a later commit never sorts before an earlier
    one even if clocks disagreed (its timestamp is raised to the one before it)."""
    entries = sorted((int(e["version"]), int(e["timestamp"])) for e in catalog.delta_table(table_name).history()
                     if "version" in e and "timestamp" in e)
    stamps, versions, floor = [], [], 0
    for version, stamp in entries:
        floor = max(floor, stamp)
        stamps.append(floor)
        versions.append(version)
    return stamps, versions
