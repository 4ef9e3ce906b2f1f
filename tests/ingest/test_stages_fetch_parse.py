"""FetchStage, ModelParseStage and ParseStage called directly on 3-row tables (no Ray)."""

from __future__ import annotations

import hashlib
import shutil

import pyarrow as pa

from kb_ray.ingest.record import DOCUMENT_RECORD, FETCHED_RECORD
from kb_ray.ingest.rows import from_ipc
from kb_ray.ingest.stages.fetch import FetchStage
from kb_ray.ingest.stages.model_parse import ModelParseStage
from kb_ray.ingest.stages.parse import ParseStage
from kb_ray.outcomes import Reason
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.stage_inputs import pipeline_fp, source_table, stage_config, storage


def three_files(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(GOLDEN_SOURCES / "notes.txt", src / "notes.txt")
    (src / "image.pdf").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))  # not a PDF
    return [src / "notes.txt", src / "image.pdf", src / "gone.txt"]


def fetch(config, table):
    return FetchStage(storage_options=config.storage_options, pipeline_fp=pipeline_fp(config)).run(table)


def parse_stage(config, **extra):
    return ParseStage(**storage(config), parse=config.parse, chunking=config.chunking, run_id="run_t", **extra)


def test_fetch_reads_each_file_once_and_names_its_version(tmp_path):
    config, _ = stage_config(tmp_path)
    paths = three_files(tmp_path)
    fetched, stats = fetch(config, source_table(paths))
    assert fetched.schema == FETCHED_RECORD
    rows = {row["key"]: row for row in fetched.to_pylist()}
    notes = paths[0].read_bytes()
    assert rows["notes.txt"]["data"] == notes and rows["notes.txt"]["size"] == len(notes)
    assert rows["notes.txt"]["raw_sha"] == hashlib.sha256(notes).hexdigest()
    assert rows["notes.txt"]["status"] == "ok" and rows["notes.txt"]["version_id"].startswith("ver_")
    assert rows["gone.txt"]["status"] == "failed" and rows["gone.txt"]["reason"] == Reason.UNREADABLE
    assert "FileNotFoundError" in rows["gone.txt"]["detail"] and rows["gone.txt"]["data"] is None
    assert (stats.stage, stats.rows_in, stats.rows_out) == ("fetch", 3, 3)
    assert stats.counts == {"bytes_read": len(notes) + 208, "unreadable": 1} and stats.seconds > 0


def test_parse_gives_payload_or_a_reason_code_and_counts_beside_the_data(tmp_path):
    config, _ = stage_config(tmp_path)
    fetched, _ = fetch(config, source_table(three_files(tmp_path)))
    documents, stats = parse_stage(config).run(fetched)
    assert documents.schema == DOCUMENT_RECORD
    rows = {row["key"]: row for row in documents.to_pylist()}
    good, fake, gone = rows["notes.txt"], rows["image.pdf"], rows["gone.txt"]
    assert (good["action"], good["status"], good["reason"], good["parsed"]) == ("new", "ok", None, True)
    chunks = from_ipc(good["chunks_ipc"])
    assert chunks.num_rows == good["n_chunks"] > 0
    assert from_ipc(good["versions_ipc"]).column("status").to_pylist() == ["committed"]
    assert (fake["action"], fake["reason"]) == ("failed", Reason.CORRUPT) and "image/png" in fake["detail"]
    assert from_ipc(fake["versions_ipc"]).column("reason").to_pylist() == ["corrupt"]
    assert (gone["action"], gone["reason"], gone["parsed"]) == ("failed", Reason.UNREADABLE, False)
    assert stats.counts == {"parsed": 2, "parse_failed": 1, "fallbacks": 0, "known_versions": 0}
    assert stats.rows_in == stats.rows_out == 3


def test_a_document_after_one_that_failed_to_fetch_keeps_its_payload(tmp_path):
    config, _ = stage_config(tmp_path)
    notes, _, gone = three_files(tmp_path)
    fetched, _ = fetch(config, source_table([gone, notes]))  # the failed fetch first: it has no payload columns
    documents, _ = parse_stage(config).run(fetched)
    good = next(row for row in documents.to_pylist() if row["key"] == "notes.txt")
    assert good["status"] == "ok" and from_ipc(good["versions_ipc"]).num_rows == 1
    assert from_ipc(good["chunks_ipc"]).num_rows == good["n_chunks"] > 0


def test_model_parser_failure_falls_back_with_a_structured_fallback_from(tmp_path):
    config, _ = stage_config(tmp_path, "parse.docling.enabled=true",
                             f"parse.docling.artifacts_path={tmp_path / 'no-weights'}")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("manual.pdf", "notes.txt", "figure.pdf"):
        shutil.copy(GOLDEN_SOURCES / name, src / name)
    fetched, _ = fetch(config, source_table([src / "manual.pdf", src / "notes.txt", src / "figure.pdf"]))
    model = ModelParseStage(**storage(config), parse=config.parse, chunking=config.chunking)
    first, model_stats = model.run(fetched)
    assert first.schema == FETCHED_RECORD and first.column("data").to_pylist() == fetched.column("data").to_pylist()
    assert model_stats.counts == {"model_parsed": 2, "model_failed": 2}  # the two PDFs; text has no model parser
    documents, stats = parse_stage(config).run(first)
    rows = {row["key"]: row for row in documents.to_pylist()}
    for name in ("manual.pdf", "figure.pdf"):
        assert rows[name]["status"] == "ok" and rows[name]["fallback_from"] == "docling_pdf"
        assert rows[name]["notes"][0].startswith("docling_pdf failed (model_unavailable:")
        assert from_ipc(rows[name]["versions_ipc"]).column("parser").to_pylist() == ["pdf_text"]
    assert rows["notes.txt"]["fallback_from"] is None and rows["notes.txt"]["notes"] == []
    assert stats.counts["fallbacks"] == 2


def test_pdf_bytes_ride_on_to_the_renderer_only_when_pages_are_on(tmp_path):
    config, _ = stage_config(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(GOLDEN_SOURCES / "manual.pdf", src / "manual.pdf")
    shutil.copy(GOLDEN_SOURCES / "notes.txt", src / "notes.txt")
    fetched, _ = fetch(config, source_table([src / "manual.pdf", src / "notes.txt", src / "missing.pdf"]))
    with_pages, _ = parse_stage(config, keep_raw_for_pages=True).run(fetched)
    without, _ = parse_stage(config).run(fetched)
    assert with_pages.column("raw").to_pylist() == [(src / "manual.pdf").read_bytes(), None, None]
    assert without.column("raw").null_count == 3
    assert isinstance(with_pages, pa.Table) and with_pages.num_rows == 3


def test_a_symlink_out_of_the_sources_is_refused_unless_allowed(tmp_path):
    config, _ = stage_config(tmp_path)
    src, outside = tmp_path / "src", tmp_path / "elsewhere"
    src.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("not a source\n")
    shutil.copy(GOLDEN_SOURCES / "notes.txt", outside / "notes.txt")
    (src / "escape.txt").symlink_to(outside / "secret.txt")
    (src / "linked").symlink_to(outside, target_is_directory=True)  # a directory link out, too
    (src / "inside.txt").symlink_to(src / "escape.txt")  # a chain that ends outside
    shutil.copy(GOLDEN_SOURCES / "notes.txt", src / "notes.txt")
    (src / "alias.txt").symlink_to(src / "notes.txt")  # a link within the sources is fine
    paths = [src / "escape.txt", src / "linked" / "notes.txt", src / "inside.txt", src / "notes.txt", src / "alias.txt"]
    stage = FetchStage(storage_options={}, pipeline_fp=pipeline_fp(config), local_roots=[str(src)])
    fetched, stats = stage.run(source_table(paths))
    rows = {row["uri"].rsplit("/src/", 1)[1]: row for row in fetched.to_pylist()}
    for name in ("escape.txt", "linked/notes.txt", "inside.txt"):
        assert (rows[name]["status"], rows[name]["reason"], rows[name]["data"]) == ("failed", "outside_source", None)
        assert "ingest.follow_symlinks" in rows[name]["detail"]
    assert rows["notes.txt"]["status"] == rows["alias.txt"]["status"] == "ok"
    assert stats.counts["outside_source"] == 3 and stats.counts["unreadable"] == 0
    allowed = FetchStage(storage_options={}, pipeline_fp=pipeline_fp(config), local_roots=[str(src)],
                         follow_symlinks=True)
    assert {row["status"] for row in allowed.run(source_table(paths))[0].to_pylist()} == {"ok"}
