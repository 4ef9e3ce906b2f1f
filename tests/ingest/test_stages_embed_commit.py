"""EmbedWriteStage and the driver's commit, fed by the Ray-free stages (no Ray), and the
report built from summaries and stage statistics."""

from __future__ import annotations

import json
import shutil

from kb_ray.ingest.commit import MicroBatchCommitter
from kb_ray.ingest.record import BATCH_RECORD, SUMMARY_RECORD
from kb_ray.ingest.report import IngestReport
from kb_ray.ingest.rows import from_ipc
from kb_ray.ingest.stages.base import StageStats
from kb_ray.ingest.stages.embed_write import EmbedWriteStage
from kb_ray.ingest.stages.fetch import FetchStage
from kb_ray.ingest.stages.parse import ParseStage
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.stage_inputs import pipeline_fp, source_table, stage_config, storage


def run_stages(config, table):
    stats = {}
    stages = [FetchStage(storage_options=config.storage_options, pipeline_fp=pipeline_fp(config)),
              ParseStage(**storage(config), parse=config.parse, chunking=config.chunking, run_id="run_t"),
              EmbedWriteStage(**storage(config), embedding=config.embedding)]
    for stage in stages:
        table, stats[stage.name] = stage.run(table)
    return table, stats


def sources(tmp_path):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name in ("notes.txt", "manual.pdf"):
        shutil.copy(GOLDEN_SOURCES / name, src / name)
    (src / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    return [src / "notes.txt", src / "manual.pdf", src / "latin1.txt"]


def test_embed_write_emits_one_batch_row_that_commits_with_reason_codes(tmp_path):
    config, catalog = stage_config(tmp_path)
    batch, stats = run_stages(config, source_table(sources(tmp_path)))
    assert batch.schema == BATCH_RECORD and batch.num_rows == 1
    row = batch.to_pylist()[0]
    summary = from_ipc(row["summary_ipc"])
    assert summary.schema == SUMMARY_RECORD and summary.num_rows == 3
    assert row["embeddings_computed"] == from_ipc(row["embeddings_ipc"]).num_rows == stats["embed_write"].counts[
        "embeddings_computed"] > 0
    assert {f["table_name"] for f in json.loads(row["files_json"])} == {"versions", "elements", "pages", "chunks",
                                                                       "version_chunks"}
    outcome = MicroBatchCommitter(catalog, run_id="run_t").commit(row, batch_no=0)
    assert outcome.counts["chunks_new"] == row["chunks_new"] > 0
    log = {r["uri"].rsplit("/", 1)[-1]: r for r in catalog.read("ingest_log").to_pylist()}
    assert log["latin1.txt"]["reason"] == "invalid_encoding"
    assert log["latin1.txt"]["error"].startswith("invalid_encoding: not valid UTF-8")
    assert log["notes.txt"]["reason"] is None and log["notes.txt"]["error"] is None
    failed = [v for v in catalog.read("versions").to_pylist() if v["status"] == "failed"]
    assert [(v["reason"], v["error"].split(":")[0]) for v in failed] == [("invalid_encoding", "invalid_encoding")]
    assert sorted(catalog.read("documents").column("key").to_pylist()) == ["manual.pdf", "notes.txt"]


def test_a_zip_slip_member_is_named_in_the_ingest_log_of_the_document_that_parsed(tmp_path):
    from tests.ingest.corpus import ZIP_SLIP_MEMBERS, zip_slip_docx

    config, catalog = stage_config(tmp_path)
    (tmp_path / "slip.docx").write_bytes(zip_slip_docx())
    batch, _ = run_stages(config, source_table([tmp_path / "slip.docx"]))
    MicroBatchCommitter(catalog, run_id="run_t").commit(batch.to_pylist()[0], batch_no=0)
    (log,) = catalog.read("ingest_log").to_pylist()
    assert (log["action"], log["status"], log["reason"]) == ("new", "ok", None) and log["n_chunks"] > 0
    assert log["error"].startswith("unsafe_archive_member: ")
    assert all(repr(name) in log["error"] for name in ZIP_SLIP_MEMBERS)


def test_a_rerun_takes_known_versions_from_the_catalog_and_reuses_everything(tmp_path):
    config, catalog = stage_config(tmp_path)
    paths = sources(tmp_path)
    first, _ = run_stages(config, source_table(paths))
    MicroBatchCommitter(catalog, run_id="run_1").commit(first.to_pylist()[0], batch_no=0)
    active = dict(zip(*catalog.read("documents", columns=["key", "active_version_id"]).to_pydict().values()))
    # notes.txt as the planner sends an active document; the others as after a crash before the flip
    again, stats = run_stages(config, source_table(paths, prior={"notes.txt": active["notes.txt"]}))
    summary = {r["key"]: r for r in from_ipc(again.column("summary_ipc")[0].as_py()).to_pylist()}
    assert stats["parse"].counts == {"parsed": 0, "parse_failed": 0, "fallbacks": 0, "known_versions": 2}
    assert summary["notes.txt"]["action"] == "unchanged" and summary["manual.pdf"]["action"] == "new"
    assert summary["latin1.txt"]["reason"] == "invalid_encoding" and not summary["latin1.txt"]["parsed"]
    assert "parsed before, and failed: invalid_encoding:" in summary["latin1.txt"]["detail"]
    assert stats["embed_write"].counts == {  # nothing re-parsed, nothing to embed
        "embeddings_computed": 0, "embeddings_cached": 0, "chunks_new": 0, "chunks_reused": 0, "passage_texts": 0,
        "embed_texts": 0, "late_chunks": 0, "late_vectors": 0, "embed_tokens": 0, "text_tokens": 0}


def test_report_counts_from_summaries_and_stage_statistics(tmp_path):
    config, _ = stage_config(tmp_path)
    batch, stats = run_stages(config, source_table(sources(tmp_path)))
    report = IngestReport(run_id="run_t")
    report.add_summary(from_ipc(batch.column("summary_ipc")[0].as_py()))
    total = StageStats(stage="render", counts={"pages_rendered": 3, "documents_limited": 1})
    total.add(StageStats(stage="render", rows_in=2, rows_out=2, seconds=0.5, counts={"pages_rendered": 2}))
    report.add_stage_stats({**stats, "render": total})
    assert report.failure_reasons == {"invalid_encoding": 1} and report.documents["failed"] == 1
    assert report.page_images == {"rendered": 5, "noted": 1} and report.stages["render"]["calls"] == 2
    text = report.render()
    assert "failures   invalid_encoding 1" in text and "FAILED" in text and "latin1.txt: invalid_encoding:" in text
    for name in ("fetch", "parse", "embed_write", "driver"):
        assert f"    {name}" in text
