"""Ingest into real Delta tables, checked with real DuckDB: golden, hostile files and a crash between
micro-batches through Ray Data on a real local Ray instance; the incremental and sync rules, which
the driver applies whichever executor ran the stages, on the inline executor (``INLINE``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kb_ray.catalog.purge import purge
from kb_ray.catalog.sql import run_query
from kb_ray.catalog.verify import verify_catalog
from kb_ray.ingest.run import run_ingest
from tests.conftest import GOLDEN_SOURCES
from tests.fs_snapshot import snapshot, written_outside
from tests.images import label_png
from tests.ingest.corpus import HOSTILE_MAX_BYTES, SECTIONS, hostile_files, make_pdf, small_corpus
from tests.ingest.helpers import INLINE, catalog, ingest_config, log_rows, state

pytestmark = pytest.mark.usefixtures("ray_session")
HOSTILE_MAX_SECONDS = 60


def test_golden_ingest_then_unchanged_reingest(tmp_path):
    config = ingest_config(tmp_path / "kb", [GOLDEN_SOURCES], "ingest.micro_batch_docs=5")
    first = run_ingest(config)
    golden_files = len(list(GOLDEN_SOURCES.iterdir()))
    assert first.documents["seen"] == first.documents["new"] == golden_files
    assert first.documents["failed"] == 0 and first.micro_batches >= 3
    per_batch = Counter(row["batch"] for row in log_rows(tmp_path / "kb", first.run_id))
    assert len(per_batch) == first.commits <= first.micro_batches  # group commit: the batches that had arrived
    assert max(per_batch.values()) <= 5 * config.ingest.commit_group_max_batches
    stages = first.stages  # the stage statistics came through the side channel, not the data
    passages, layout_keys = _distinct_vectors(tmp_path / "kb")  # golden's long chunks have passage vectors
    assert passages > 0 and stages["embed_write"]["counts"]["passage_texts"] >= passages
    # the default layout (index.vector_layout passages): a chunk with passages is embedded as its passages alone
    assert first.embeddings["computed"] == layout_keys > golden_files
    assert first.embeddings["computed"] < first.chunks["new"] + passages  # no chunk text embedded beside its passages
    assert stages["fetch"]["rows_in"] == stages["parse"]["rows_out"] == golden_files
    assert stages["fetch"]["counts"]["bytes_read"] == sum(p.stat().st_size for p in GOLDEN_SOURCES.iterdir())
    assert stages["parse"]["counts"]["parsed"] == first.parses and stages["embed_write"]["rows_out"] == first.micro_batches
    assert first.driver["commit_seconds"] > 0 and "    embed_write" in first.render()
    assert verify_catalog(catalog(tmp_path / "kb")).ok(strict=True)
    versions_before = catalog(tmp_path / "kb").read("versions").num_rows

    second = run_ingest(config)
    assert second.parses == 0 and second.embeddings["computed"] == 0
    assert second.documents["unchanged"] == golden_files
    assert catalog(tmp_path / "kb").read("versions").num_rows == versions_before
    assert len(log_rows(tmp_path / "kb", second.run_id)) == golden_files


def test_editing_one_paragraph_embeds_only_the_changed_chunks(tmp_path):
    corpus = small_corpus(tmp_path / "src")
    config = ingest_config(tmp_path / "kb", [corpus], INLINE)
    run_ingest(config)
    edited = list(SECTIONS)
    edited[2] = ("Motor", "The motor is rated at 3.0 kW. It trips when the winding exceeds 140 degrees Celsius.")
    make_pdf(corpus / "pump.pdf", edited)
    report = run_ingest(config)
    assert report.documents["changed"] == 1 and report.parses == 1
    assert 1 <= report.embeddings["computed"] == report.chunks["new"] <= 3
    assert report.chunks["reused"] >= 3
    assert verify_catalog(catalog(tmp_path / "kb")).ok()


def test_new_bytes_with_the_same_text_make_a_version_but_no_chunks(tmp_path):
    corpus = small_corpus(tmp_path / "src")
    config = ingest_config(tmp_path / "kb", [corpus], INLINE)
    run_ingest(config)
    make_pdf(corpus / "pump.pdf", SECTIONS, author="someone else")  # new bytes, same text
    report = run_ingest(config)
    assert report.documents["changed"] == 1
    assert report.chunks["new"] == 0 and report.embeddings["computed"] == 0 and report.chunks["reused"] == 4
    versions = catalog(tmp_path / "kb").read("versions").to_pylist()
    pump = [v for v in versions if v["title"] == "Pump care" or "pump" in (v["canonical_text"] or "").lower()[:200]]
    assert len({v["raw_sha"] for v in pump}) == 2 and len({v["text_sha"] for v in pump}) == 1


def test_full_sync_tombstones_vanished_sources_and_purge_leaves_no_residue(tmp_path):
    corpus = small_corpus(tmp_path / "src")
    config = ingest_config(tmp_path / "kb", [corpus], "ingest.sync=full", INLINE)
    run_ingest(config)
    (corpus / "notes.txt").unlink()
    report = run_ingest(config)
    assert report.documents["deleted"] == 1
    visible = run_query(catalog(tmp_path / "kb"), "SELECT count(*) AS n FROM active_chunks WHERE text LIKE '%garden%'")
    assert visible.column("n")[0].as_py() == 0
    before = verify_catalog(catalog(tmp_path / "kb"))
    assert before.ok() and before.residue["tombstoned_documents"] == 1
    purged = purge(catalog(tmp_path / "kb"))
    assert purged.documents == 1 and purged.deleted_rows["chunks"] > 0
    after = verify_catalog(catalog(tmp_path / "kb"))
    assert after.ok(strict=True), after.render()


def test_incremental_sync_keeps_vanished_documents(tmp_path):
    corpus = small_corpus(tmp_path / "src")
    config = ingest_config(tmp_path / "kb", [corpus], INLINE)
    run_ingest(config)
    (corpus / "notes.txt").unlink()
    assert run_ingest(config).documents["deleted"] == 0
    assert run_query(catalog(tmp_path / "kb"), "SELECT count(*) AS n FROM active_documents").column("n")[0].as_py() == 4


@pytest.mark.slow  # the crash inside a micro-batch (tests/ingest/test_faults.py) covers this path in the default run
def test_a_crash_between_micro_batches_resumes_without_duplicates(tmp_path):
    corpus = small_corpus(tmp_path / "src")
    clean = ingest_config(tmp_path / "clean", [corpus])
    run_ingest(clean)
    crashing = ingest_config(tmp_path / "kb", [corpus])
    with pytest.raises(RuntimeError, match="injected failure"):
        run_ingest(crashing, fail_after_batches=1)
    partial = state(tmp_path / "kb")
    assert 0 < len(partial["documents"]) < 4
    resumed = run_ingest(crashing)
    assert resumed.documents["unchanged"] == len(partial["documents"])
    assert state(tmp_path / "kb") == state(tmp_path / "clean")
    assert verify_catalog(catalog(tmp_path / "kb")).ok(strict=True)


def test_hostile_files_fail_with_reasons_and_good_ones_commit(tmp_path):
    corpus = small_corpus(tmp_path / "src")
    label_png(corpus / "label.png", "Calibrate the flowmeter yearly")  # an image is a document too
    odd_names = ["a..b.txt", "new\nline.txt", "x" * 240 + ".txt"]  # ingested under their own names
    for name in odd_names:
        (corpus / name).write_text(f"The file {name[:12]!r} has an odd name but ordinary text.\n")
    expected = hostile_files(corpus / "bad")
    assert len(set(expected.values())) >= 12  # hostile kinds, one reason code each
    config = ingest_config(tmp_path / "kb", [corpus], "parse.max_pages=5", f"parse.max_bytes={HOSTILE_MAX_BYTES}",
                           f"parse.max_seconds={HOSTILE_MAX_SECONDS}")
    before = snapshot(tmp_path)
    report = run_ingest(config)
    allowed = [tmp_path / "kb", Path.home() / ".cache" / "kb-ray"]  # the catalog; the embedder's export cache
    assert written_outside(before, snapshot(tmp_path), allowed=allowed) == []
    assert report.documents["failed"] == len(expected) and report.documents["new"] == 5 + len(odd_names)
    keys = set(catalog(tmp_path / "kb").read("documents", columns=["key"]).column("key").to_pylist())
    assert {str(corpus / name) for name in odd_names} <= keys
    parsers = {row["mime"]: row["parser"] for row in catalog(tmp_path / "kb").read("versions").to_pylist()
               if row["status"] != "failed"}
    assert parsers["image/png"] == "image_ocr"
    slowest = max(row["total_seconds"] or 0 for row in log_rows(tmp_path / "kb", report.run_id))
    assert slowest < HOSTILE_MAX_SECONDS  # deep nesting and bombs are refused well inside the time limit
    assert_searchable(config, {"Replace the shaft seal AF-SK-118 every 4000 hours": "pump.pdf",
                               "calibrate the flowmeter": "label.png"})
    assert report.status == "failed_documents"
    reasons = {row["uri"].rsplit("/", 1)[-1]: row["error"] for row in log_rows(tmp_path / "kb", report.run_id)
               if row["action"] == "failed"}
    assert {name: error.split(":")[0] for name, error in reasons.items()} == expected  # display text
    codes = {row["uri"].rsplit("/", 1)[-1]: row["reason"] for row in log_rows(tmp_path / "kb", report.run_id)
             if row["action"] == "failed"}
    assert codes == expected and report.failure_reasons == dict(Counter(expected.values()))
    by_reason = run_query(catalog(tmp_path / "kb"), "SELECT reason, n_failures FROM (" + _ready("failure_reasons") + ")")
    assert dict(zip(*by_reason.to_pydict().values())) == dict(Counter(expected.values()))
    assert verify_catalog(catalog(tmp_path / "kb")).ok()
    again = run_ingest(config)
    assert again.parses == 0 and again.documents["failed"] == len(expected)


def assert_searchable(config, quotes: dict[str, str]) -> None:
    """Each quote's file is the first hit for it, after an index build over the catalog."""
    from kb_ray.index.build import build_index
    from kb_ray.search import HybridSearcher

    searcher = HybridSearcher.open(config, generation_id=build_index(config).generation_id)
    for quote, filename in quotes.items():
        assert searcher.search(quote, k=1).hits[0]["uri"].endswith(filename)


def _ready(name: str) -> str:
    from kb_ray.catalog.sql import load_ready_query

    return load_ready_query(name).rstrip().rstrip(";")


def _distinct_vectors(kb_root) -> tuple[int, int]:
    """Recomputed from the catalog's chunk rows: their distinct passage texts (kb_ray/index/passages.py)
    and the distinct vectors the default vector layout gives them (kb_ray/index/vector_layout.py)."""
    from kb_ray import ids
    from kb_ray.config import IndexSettings
    from kb_ray.index.passages import passage_texts
    from kb_ray.index.vector_layout import VectorLayout

    settings = IndexSettings()
    layout = VectorLayout.from_settings(settings)
    chunks = catalog(kb_root).read("chunks", columns=["text", "heading_path"]).to_pylist()
    passages = {ids.sha256_text(t) for row in chunks
                for t in passage_texts(row["text"], row["heading_path"], max_chars=settings.passage_chars)}
    return len(passages), len({key for row in chunks for key in layout.chunk(row["text"], row["heading_path"]).keys})
