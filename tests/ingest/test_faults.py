"""Faults injected into real ingests (real local Ray, real Delta): after each, and after the
rerun a person would do, the catalog equals a clean run's — same documents, versions,
chunks and embeddings, nothing twice — and ``verify --strict`` is OK."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.verify import verify_catalog
from kb_ray.ingest.run import run_ingest
from kb_ray.processes import descendants, start_time
from tests.conftest import REPO_ROOT
from tests.ingest.corpus import small_corpus
from tests.ingest.helpers import catalog, ingest_config, state

pytestmark = pytest.mark.usefixtures("ray_session")
PARSE_ACTOR, EMBED_ACTOR = "ray::MapWorker(MapBatches(ParseStage))", "ray::MapWorker(MapBatches(EmbedWriteStage))"


def fault_corpus(root: Path) -> Path:
    """Six documents: three micro-batches of two."""
    small_corpus(root)
    for i in range(2):
        (root / f"pump_{i}.txt").write_text(f"Pump {i} service notes\n\nReplace seal type S-{i}0 every {i + 2}000 hours. "
                                            f"The impeller of pump {i} is bronze.\n")
    return root


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return fault_corpus(tmp_path_factory.mktemp("faults") / "src")


@pytest.fixture(scope="module")
def clean(corpus, tmp_path_factory) -> dict:
    """What one uninterrupted ingest of the corpus leaves in the catalog."""
    kb = tmp_path_factory.mktemp("clean") / "kb"
    run_ingest(ingest_config(kb, [corpus]))
    return state(kb)


def assert_like_clean(kb: Path, clean: dict) -> None:
    assert state(kb) == clean
    assert verify_catalog(catalog(kb)).ok(strict=True)


def test_a_crash_between_two_table_commits_of_one_micro_batch_is_repaired_by_the_rerun(corpus, clean, tmp_path,
                                                                                      monkeypatch):
    real_commit = DeltaCatalog.commit_files

    def crash_before_versions(self, table_name, files, **kwargs):
        if table_name == "versions" and kwargs.get("app_version") == 1:
            raise RuntimeError("injected crash between the version_chunks and versions commits")
        return real_commit(self, table_name, files, **kwargs)

    monkeypatch.setattr(DeltaCatalog, "commit_files", crash_before_versions)
    config = ingest_config(tmp_path / "kb", [corpus])
    with pytest.raises(RuntimeError, match="injected crash"):
        run_ingest(config)
    landed = catalog(tmp_path / "kb").read("version_chunks").num_rows
    assert landed > len(state(tmp_path / "kb")["documents"])  # batch 1's rows landed, its documents did not flip
    monkeypatch.setattr(DeltaCatalog, "commit_files", real_commit)
    run_ingest(config)
    assert_like_clean(tmp_path / "kb", clean)


@pytest.mark.slow
def test_storage_failing_writes_fails_the_run_clearly_shows_nothing_half_done_and_the_rerun_completes(
        corpus, clean, tmp_path, monkeypatch):
    failing = {"from_batch": 2, "writes": 0}
    real = {name: getattr(DeltaCatalog, name) for name in ("commit_files", "merge_upsert")}

    def failing_write(name):
        def write(self, table_name, *args, **kwargs):
            if kwargs.get("app_version", -1) >= failing["from_batch"]:
                failing["writes"] += 1
                raise OSError(5, f"injected storage failure writing {table_name}")
            return real[name](self, table_name, *args, **kwargs)
        return write

    for name in real:
        monkeypatch.setattr(DeltaCatalog, name, failing_write(name))
    config = ingest_config(tmp_path / "kb", [corpus])
    with pytest.raises(OSError, match="injected storage failure"):
        run_ingest(config)
    half = state(tmp_path / "kb")
    assert failing["writes"] >= 1 and 0 < len(half["documents"]) < len(clean["documents"])
    assert verify_catalog(catalog(tmp_path / "kb")).ok()  # what readers see is whole: no active document misses rows
    runs = catalog(tmp_path / "kb").read("ingest_runs").to_pylist()
    assert [run["status"] for run in runs] == ["crashed"]
    for name, method in real.items():
        monkeypatch.setattr(DeltaCatalog, name, method)
    report = run_ingest(config)
    assert report.documents["unchanged"] == len(half["documents"])
    assert_like_clean(tmp_path / "kb", clean)


@pytest.mark.slow
def test_parse_and_embed_actors_killed_mid_run_lose_and_duplicate_nothing(corpus, clean, tmp_path):
    killed: list[str] = []

    def kill_actors_after_the_first_batch(progress) -> None:
        if not killed:
            killed.extend(kill_processes_titled(PARSE_ACTOR, EMBED_ACTOR))

    report = run_ingest(ingest_config(tmp_path / "kb", [corpus]), on_progress=kill_actors_after_the_first_batch)
    assert EMBED_ACTOR in killed  # the embed actor was still working when the first batch committed
    assert report.status == "succeeded" and report.documents["new"] == len(clean["documents"])
    assert_like_clean(tmp_path / "kb", clean)


def test_two_ingests_of_overlapping_sources_at_once_both_complete_with_each_document_once(corpus, tmp_path):
    extra = {side: tmp_path / side for side in ("a", "b")}
    for side, folder in extra.items():
        folder.mkdir()
        (folder / f"only_{side}.txt").write_text(f"Only in source {side}.\n\nValve {side} opens at 3 bar.\n")
    reports, errors = {}, []

    def ingest(side: str) -> None:
        try:
            reports[side] = run_ingest(ingest_config(tmp_path / "kb", [corpus, extra[side]]))
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=ingest, args=(side,)) for side in extra]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert errors == [] and set(reports) == {"a", "b"}
    shared = len(list(corpus.iterdir()))
    assert sorted(r.documents["new"] for r in reports.values()) == [1, shared + 1]  # the second waited, then reused
    assert sorted(r.documents["unchanged"] for r in reports.values()) == [0, shared]
    kb = catalog(tmp_path / "kb")
    assert len(state(tmp_path / "kb")["documents"]) == shared + 2
    assert verify_catalog(kb).ok(strict=True)  # among the checks: no key twice in any table
    assert kb.read("leases").num_rows == 0


@pytest.mark.slow
def test_a_driver_killed_with_sigkill_leaves_no_process_and_the_rerun_resumes(corpus, clean, tmp_path):
    kb = tmp_path / "kb"
    driver = subprocess.Popen(
        [sys.executable, "-m", "kb_ray.cli", "ingest", "--config", str(REPO_ROOT / "conf" / "local.yaml"),
         "--source", str(corpus), "--set", f"kb_root={kb}", "--set", "ingest.micro_batch_docs=2",
         "--set", "ray.parse.batch_size=2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    try:
        wait_for_line(driver, "files (", timeout_s=300)  # the first micro-batch committed
        ray_processes = {pid: start_time(pid) for pid in descendants([driver.pid]) if pid != driver.pid}
        driver.kill()
        driver.wait(timeout=30)
    finally:
        driver.kill()
    assert any(pid for pid in ray_processes)  # it had started its own Ray
    survivors = wait_until_gone(ray_processes, timeout_s=30)
    assert survivors == []
    report = run_ingest(ingest_config(kb, [corpus]))
    assert report.documents["unchanged"] > 0  # resumed: what the killed run committed is kept
    assert_like_clean(kb, clean)


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
    pytest.fail(f"the driver never printed {text!r} (exit code {process.poll()})")


def wait_until_gone(processes: dict[int, int | None], *, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [pid for pid, started in processes.items() if started is not None and start_time(pid) == started]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)
