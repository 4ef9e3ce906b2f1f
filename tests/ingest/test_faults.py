"""Faults injected into real ingests (real local Ray, real Delta): after each, and after the
rerun a person would do, the catalog equals a clean run's — same documents, versions,
chunks and embeddings, nothing twice — and ``verify --strict`` is OK."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kb_ray.catalog.verify import verify_catalog
from kb_ray.ingest.run import run_ingest
from tests.conftest import REPO_ROOT
from tests.ingest.corpus import small_corpus
from tests.ingest.faults import (
    EMBED_ACTOR,
    PARSE_ACTOR,
    cli_ingest,
    failing_writes,
    kill_after_first_batch,
    kill_processes_titled,
    wait_until_gone,
)
from tests.ingest.helpers import INLINE, catalog, ingest_config, state

pytestmark = pytest.mark.usefixtures("ray_session")


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
    run_ingest(ingest_config(kb, [corpus], INLINE))  # the inline catalog is the Ray one (tests/ingest/test_inline.py)
    return state(kb)


def assert_like_clean(kb: Path, clean: dict) -> None:
    assert state(kb) == clean
    assert verify_catalog(catalog(kb)).ok(strict=True)


def test_a_crash_between_two_table_commits_of_one_micro_batch_is_repaired_by_the_rerun(corpus, clean, tmp_path):
    config = ingest_config(tmp_path / "kb", [corpus], INLINE)  # the driver's commits, on either executor
    with failing_writes(table="versions", from_batch=1, error=RuntimeError):  # after batch 1's version_chunks
        with pytest.raises(RuntimeError, match="injected failure writing versions"):
            run_ingest(config)
    landed = catalog(tmp_path / "kb").read("version_chunks").num_rows
    assert landed > len(state(tmp_path / "kb")["documents"])  # batch 1's rows landed, its documents did not flip
    run_ingest(config)
    assert_like_clean(tmp_path / "kb", clean)


@pytest.mark.slow
def test_storage_failing_writes_fails_the_run_clearly_shows_nothing_half_done_and_the_rerun_completes(
        corpus, clean, tmp_path):
    config = ingest_config(tmp_path / "kb", [corpus], INLINE)  # the driver's writes, on either executor
    with failing_writes(from_batch=2) as refused:
        with pytest.raises(OSError, match="injected failure writing"):
            run_ingest(config)
    half = state(tmp_path / "kb")
    assert refused["writes"] >= 1 and 0 < len(half["documents"]) < len(clean["documents"])
    assert verify_catalog(catalog(tmp_path / "kb")).ok()  # what readers see is whole: no active document misses rows
    runs = catalog(tmp_path / "kb").read("ingest_runs").to_pylist()
    assert [run["status"] for run in runs] == ["crashed"]
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


@pytest.mark.slow  # three ingests; the lease itself is tested without Ray in tests/catalog/test_lease.py
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
    driver = cli_ingest(kb_root=kb, sources=[corpus], config=REPO_ROOT / "conf" / "local.yaml")
    ray_processes = kill_after_first_batch(driver)
    assert any(pid for pid in ray_processes)  # it had started its own Ray
    survivors = wait_until_gone(ray_processes, timeout_s=30)
    assert survivors == []
    report = run_ingest(ingest_config(kb, [corpus]))
    assert report.documents["unchanged"] > 0  # resumed: what the killed run committed is kept
    assert_like_clean(kb, clean)
