"""The watcher's decisions (kb_ray/ingest/watch.py) over real file events from watchfiles, with
the ingest replaced by a function that counts its calls and does what an ingest does to the
tree (reads every file, writes into ``kb_root`` inside it): no Ray here; the whole command over
real ingests is tests/ingest/test_watch_cli.py (slow)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kb_ray.config import KbConfig, WatchSettings, load_config
from kb_ray.ingest.watch import ChangeFilter, PendingChanges, watch_sources
from tests.conftest import REPO_ROOT

FAST = {"debounce_ms": 200, "settle_s": 0.4, "max_wait_s": 20.0, "poll_interval_s": 0.3}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _config(tmp_path: Path, source: Path, **watch) -> KbConfig:
    return load_config(REPO_ROOT / "conf" / "local.yaml", overrides=[
        f"kb_root={source / 'kbroot'}", f"ingest.sources=[{source}]",  # inside the tree, not hidden
        *(f"ingest.watch.{key}={value}" for key, value in {**FAST, **watch}.items())])


class Watch:
    """``watch_sources`` in a thread; ``ingest`` reads every file and writes into kb_root."""

    def __init__(self, config: KbConfig, source: Path) -> None:
        self.config, self.source, self.calls = config, source, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.stats = None

    def _ingest(self) -> None:
        self.calls.append(time.monotonic())
        for path in self.source.rglob("*"):
            if path.is_file():
                path.read_bytes()
        kb = Path(self.config.kb_root)
        kb.mkdir(exist_ok=True)
        (kb / f"run-{len(self.calls)}.json").write_text("{}")

    def _run(self) -> None:
        self.stats = watch_sources(self.config, ingest=self._ingest, stop=self.stop)

    def __enter__(self) -> Watch:
        self.thread.start()
        _wait_for(lambda: len(self.calls) >= 1)
        time.sleep(0.3)  # the watcher's inotify watches are in place once watchfiles polls
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def _wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_filter_drops_hidden_temp_and_kb_root_paths(tmp_path):
    kb = tmp_path / "src" / "kb"
    keep = ChangeFilter(ignored_roots=[str(kb)])
    assert keep(None, str(tmp_path / "src" / "manual.pdf"))
    assert keep(None, str(tmp_path / "src" / "kb-notes.md"))  # only kb_root itself is ignored
    assert not keep(None, str(kb / "documents" / "part-0.parquet"))
    assert not keep(None, str(kb))
    for name in (".git/index", "notes/.draft.md", "report.docx.part", "~$report.docx", "a.md~", ".#a.md", "b.swp"):
        assert not keep(None, str(tmp_path / "src" / name)), name


def test_pending_changes_settle_on_quiet_time_and_still_files(tmp_path):
    clock, growing = Clock(), tmp_path / "big.bin"
    growing.write_bytes(b"x" * 10)
    pending = PendingChanges(WatchSettings(settle_s=2.0, max_wait_s=60.0), clock=clock)
    assert not pending.due()
    pending.add([str(growing)])
    clock.now += 1.0
    assert not pending.due()  # not quiet long enough
    clock.now += 1.5
    growing.write_bytes(b"x" * 20)  # still being written: its size moved since the event
    assert not pending.due()
    clock.now += 2.1
    assert pending.due()
    pending.clear()
    assert not pending and not pending.due()


def test_pending_changes_are_due_after_max_wait_even_while_events_keep_coming(tmp_path):
    clock = Clock()
    pending = PendingChanges(WatchSettings(settle_s=2.0, max_wait_s=5.0, max_tracked_paths=3), clock=clock)
    for second in range(6):
        pending.add([str(tmp_path / f"f{second}.txt")])
        assert pending.due() == (second == 5)
        clock.now += 1.0
    assert pending.overflow and len(pending.paths) == 3  # tracking is bounded; the time rule still holds


def test_an_ingest_does_not_trigger_the_next_though_it_reads_the_tree_and_writes_kb_root(tmp_path):
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    for index in range(20):
        (source / "sub" / f"doc{index}.txt").write_text(f"document {index}")
    config = _config(tmp_path, source)
    with Watch(config, source) as watch:
        (source / "sub" / "new.txt").write_text("one real change")  # its ingest runs under the watcher
        _wait_for(lambda: len(watch.calls) >= 2)
        time.sleep(3.0)  # ~7 settle periods after an ingest that read every file and wrote into kb_root
        (source / ".hidden.txt").write_text("hidden")
        (source / "draft.txt.part").write_text("partial download")
        time.sleep(1.5)
    assert len(watch.calls) == 2 and watch.stats.triggers == ["start", "changes"]


def test_a_burst_of_a_thousand_files_becomes_one_ingest(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    config = _config(tmp_path, source)
    with Watch(config, source) as watch:
        for index in range(1000):
            (source / f"burst{index:04d}.txt").write_text(f"burst document {index}\n" * 20)
            if index % 100 == 0:
                time.sleep(0.1)  # a copy that takes a while: more than one debounce window
        _wait_for(lambda: len(watch.calls) >= 2)
        time.sleep(2.0)  # nothing more follows
    assert len(watch.calls) == 2 and watch.stats.triggers == ["start", "changes"]
    assert watch.stats.events >= 1000


def test_a_file_still_being_written_is_ingested_once_it_is_complete(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    config = _config(tmp_path, source, settle_s=0.6)
    target = source / "large.txt"
    with Watch(config, source) as watch, target.open("w") as stream:
        for _ in range(8):  # 2.4 s of writing, a little at a time, with gaps shorter than settle_s
            stream.write("a line of a file that is still being copied\n" * 50)
            stream.flush()
            os.fsync(stream.fileno())
            time.sleep(0.3)
        finished = time.monotonic()
        stream.close()
        _wait_for(lambda: len(watch.calls) >= 2)
    assert watch.calls[1] >= finished  # not before the last write
    assert len(watch.calls) == 2


@pytest.mark.parametrize("remote", ["memory://watched-bucket"])
def test_object_store_sources_are_polled_and_a_listing_difference_ingests(tmp_path, remote):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe(f"{remote}/a.txt", b"first object")
    config = load_config(REPO_ROOT / "conf" / "local.yaml", overrides=[
        f"kb_root={tmp_path / 'kb'}", f"ingest.sources=[{remote}]",
        *(f"ingest.watch.{key}={value}" for key, value in FAST.items())])
    calls, stop = [], threading.Event()
    thread = threading.Thread(target=lambda: watch_sources(config, ingest=lambda: calls.append(1), stop=stop),
                              daemon=True)
    thread.start()
    try:
        _wait_for(lambda: len(calls) == 1)
        time.sleep(1.0)  # three polls of an unchanged listing
        assert len(calls) == 1
        fs.pipe(f"{remote}/b.txt", b"second object")
        _wait_for(lambda: len(calls) == 2)
    finally:
        stop.set()
        thread.join(timeout=10)
        fs.rm(remote, recursive=True)
