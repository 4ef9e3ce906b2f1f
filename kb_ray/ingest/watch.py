"""``kb-ray watch``: keep the knowledge base current while sources change (docs/watch.md).

One incremental ingest runs at the start (it catches up with whatever changed while nobody
watched); after that a change becomes an ingest only when it has settled:

* local sources are watched with ``watchfiles`` (inotify / FSEvents / ReadDirectoryChangesW
  through the Rust ``notify`` crate). Events for hidden files and directories, editor and
  download temp files, and anything under ``kb_root`` are dropped by :class:`ChangeFilter`;
  reads raise no events at all, so the watcher's own ingests cannot re-trigger it;
* object-store sources are listed every ``ingest.watch.poll_interval_s`` and a listing that
  differs from the previous one (key, size, mtime) counts as a change;
* a pending change is ingested once no event came for ``settle_s`` and every tracked changed
  file kept its size and mtime over that time (a file still being copied is waited for), or
  at the latest ``max_wait_s`` after the first pending event. A burst of thousands of events
  therefore becomes one ingest; the ingest itself lists the sources and processes only what
  changed, in bounded micro-batches, and refreshes the served index (``index.auto_refresh``).

The watcher does not know what an ingest is: it calls ``ingest()`` and counts. The CLI wires
``run_ingest`` (kb_ray/cli/watch_command.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kb_ray.catalog.storage import is_local, normalize_root
from kb_ray.config import KbConfig, WatchSettings

logger = logging.getLogger(__name__)
TEMP_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".crdownload", ".download", ".swp", ".swx", ".swo", "~")
TEMP_PREFIXES = (".#", "~$", "#")


@dataclass
class WatchStats:
    ingests: int = 0
    events: int = 0  # events that passed the filter
    triggers: list[str] = field(default_factory=list)  # why each ingest ran: "start", "changes", "listing"


class ChangeFilter:
    """``watchfiles`` filter: True for an event that may change what is ingested."""

    def __init__(self, *, ignored_roots: list[str]) -> None:
        self.ignored = [root.rstrip(os.sep) + os.sep for root in ignored_roots]

    def __call__(self, change: object, path: str) -> bool:
        if any((path + os.sep).startswith(root) for root in self.ignored):
            return False
        parts = path.split(os.sep)
        if any(part.startswith(".") and part not in (".", "..") for part in parts):
            return False
        name = parts[-1]
        return not (name.endswith(TEMP_SUFFIXES) or name.startswith(TEMP_PREFIXES))


class PendingChanges:
    """Changed paths since the last ingest, and whether they have settled."""

    def __init__(self, settings: WatchSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings, self.clock = settings, clock
        self.paths: dict[str, tuple[int, int] | None] = {}  # path -> (size, mtime_ns) when last looked at
        self.overflow = False
        self.first_at: float | None = None
        self.last_event_at = 0.0
        self.trigger: str | None = None  # "changes" (file events) or "listing" (an object-store diff)

    def __bool__(self) -> bool:
        return self.first_at is not None

    def add(self, paths: list[str]) -> None:
        now = self.clock()
        self.first_at = now if self.first_at is None else self.first_at
        self.last_event_at = now
        self.trigger = self.trigger or "changes"
        for path in paths:
            if len(self.paths) >= self.settings.max_tracked_paths and path not in self.paths:
                self.overflow = True
                continue
            self.paths[path] = _stat(path)

    def due(self) -> bool:
        """Quiet for ``settle_s`` with every tracked file unchanged since its last event, or
        pending for ``max_wait_s``. Files still moving push the ingest back."""
        if self.first_at is None:
            return False
        now = self.clock()
        if self.trigger == "listing" or now - self.first_at >= self.settings.max_wait_s:
            return True  # a listing difference is a settled fact: the listing saw finished objects
        if now - self.last_event_at < self.settings.settle_s:
            return False
        moving = [path for path, seen in self.paths.items() if _stat(path) != seen]
        for path in moving:
            self.paths[path] = _stat(path)
        if moving:
            self.last_event_at = now
        return not moving

    def add_listing_change(self) -> None:
        self.first_at = self.first_at if self.first_at is not None else self.clock()
        self.trigger = "listing"

    def clear(self) -> None:
        self.paths.clear()
        self.overflow, self.first_at, self.trigger = False, None, None


def _stat(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None  # deleted: settled as far as this path goes
    return info.st_size, info.st_mtime_ns


class ListingPoller:
    """Object-store sources: a fingerprint of their listing, compared every poll interval."""

    def __init__(self, config: KbConfig, sources: list[str]) -> None:
        self.config, self.sources = config, sources
        self.last: str | None = self.fingerprint() if sources else None
        self.next_at = time.monotonic() + config.ingest.watch.poll_interval_s

    def fingerprint(self) -> str:
        from kb_ray.ingest.listing import list_sources

        digest = hashlib.sha256()
        reader = list_sources(self.sources, collection="-", include=self.config.ingest.include,
                              storage_options=self.config.storage_options, sidecars=set())
        for batch in reader:
            for key, size, mtime in zip(*(batch.column(name).to_pylist() for name in ("key", "size", "mtime"))):
                digest.update(f"{key}\0{size}\0{mtime}\n".encode())
        return digest.hexdigest()

    def changed(self) -> bool:
        if not self.sources or time.monotonic() < self.next_at:
            return False
        self.next_at = time.monotonic() + self.config.ingest.watch.poll_interval_s
        current = self.fingerprint()
        changed, self.last = current != self.last, current
        return changed


def watch_sources(config: KbConfig, *, ingest: Callable[[], object], stop: threading.Event,
                  on_changes: Callable[[int, str], None] | None = None) -> WatchStats:
    """Ingest once, then again whenever a settled change is pending, until ``stop`` is set.
    ``on_changes(n_events, trigger)`` hears before each ingest after the first."""
    settings = config.ingest.watch
    local = [normalize_root(uri) for uri in config.ingest.source_uris if is_local(uri)]
    remote = [uri for uri in config.ingest.source_uris if not is_local(uri)]
    stats = WatchStats()
    _ingest(ingest, stats, "start")
    poller = ListingPoller(config, remote)
    pending = PendingChanges(settings)
    tick_ms = max(50, int(min(settings.settle_s, settings.poll_interval_s) * 500))  # half the shorter wait
    for changes in _events(local, config=config, stop=stop, tick_ms=tick_ms):
        if changes:
            stats.events += len(changes)
            pending.add([path for _, path in changes])
        if poller.changed():
            pending.add_listing_change()
        if pending.due():
            trigger = pending.trigger or "changes"
            if on_changes:
                on_changes(len(pending.paths), trigger)
            pending.clear()
            _ingest(ingest, stats, trigger)
    return stats


def _ingest(ingest: Callable[[], object], stats: WatchStats, trigger: str) -> None:
    stats.ingests += 1
    stats.triggers.append(trigger)
    ingest()


def _events(local: list[str], *, config: KbConfig, stop: threading.Event, tick_ms: int):
    """Sets of ``(change, path)`` from watchfiles; an empty set every ``tick_ms`` without events,
    so pending changes and object-store listings are looked at on time."""
    if not local:
        while not stop.wait(tick_ms / 1000):
            yield set()
        return
    import watchfiles

    ignored = [normalize_root(config.kb_root)] if is_local(config.kb_root) else []
    yield from watchfiles.watch(*local, watch_filter=ChangeFilter(ignored_roots=ignored),
                                debounce=config.ingest.watch.debounce_ms, step=50, stop_event=stop,
                                rust_timeout=tick_ms, yield_on_timeout=True, raise_interrupt=False)
