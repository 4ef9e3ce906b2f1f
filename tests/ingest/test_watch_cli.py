"""``kb-ray watch`` as a person runs it: a driver process of its own, real ingests into Delta,
the index built on the first ingest and refreshed with delta segments after (slow: Ray start
and model load). The watcher's decisions alone, without Ray, are tests/ingest/test_watch.py."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from kb_ray.config import load_config
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow
QUIET_S = 30.0  # the bound: this long over an unchanged tree, no second ingest


class Lines:
    """The watch process's stdout, read in a thread, each line with the time it arrived."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.queue: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.queue.put((time.monotonic(), line))

    def wait_for(self, text: str, *, timeout_s: float) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                arrived, line = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return arrived
        raise AssertionError(f"no line with {text!r} within {timeout_s} s; output:\n{''.join(self.seen)}")

    def drain(self) -> list[str]:
        while not self.queue.empty():
            self.seen.append(self.queue.get()[1])
        return self.seen


def _top_uri(searcher, word: str) -> str | None:
    """What a running service answers: it follows the live generation and its segments."""
    searcher.refresh()
    hits = searcher.search(word, k=1, mode="lexical").hits
    return hits[0]["uri"] if hits else None


def test_watch_ingests_once_over_an_unchanged_tree_and_a_new_file_becomes_searchable(tmp_path):
    source, kb = tmp_path / "src", tmp_path / "kb"
    source.mkdir()
    for index in range(3):
        (source / f"note{index}.md").write_text(f"# Note {index}\n\nA plain note about pumps, number {index}.\n")
    command = [sys.executable, "-m", "kb_ray.cli", "watch", "--source", str(source), "--set", f"kb_root={kb}",
               "--set", "ingest.watch.settle_s=1.0", "--set", "ingest.watch.debounce_ms=300"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    lines = Lines(process)
    try:
        lines.wait_for("index built", timeout_s=400)
        time.sleep(QUIET_S)  # the first ingest read every file and wrote kb_root: nothing may follow
        assert sum(" ingest " in line for line in lines.drain()) == 1, "".join(lines.seen)
        from kb_ray.search import HybridSearcher

        searcher = HybridSearcher.open(load_config(REPO_ROOT / "conf" / "local.yaml", overrides=[f"kb_root={kb}"]))
        assert _top_uri(searcher, "quokka") != str(source / "fresh.md")

        (source / "fresh.md").write_text("# Fresh\n\nThe quokka valve was replaced in March.\n")
        written = time.monotonic()
        ingested = lines.wait_for("new 1 changed 0", timeout_s=300)
        while not (found := _top_uri(searcher, "quokka") or "").endswith("fresh.md") \
                and time.monotonic() - written < 120:
            time.sleep(0.2)
        latency = time.monotonic() - written
        assert found.endswith("fresh.md"), found
        print(f"watch: event to ingest reported {ingested - written:.1f} s, to searchable {latency:.1f} s")
        print("".join(line for line in lines.seen if " ingest " in line))
        process.send_signal(signal.SIGINT)
        lines.wait_for("watch stopped: 2 ingests (start, changes)", timeout_s=120)
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
