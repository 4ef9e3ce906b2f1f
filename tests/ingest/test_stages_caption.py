"""CaptionStage called directly on parsed documents (no Ray), against a real
OpenAI-compatible HTTP server on 127.0.0.1 and a temporary catalog."""

from __future__ import annotations

import shutil

from kb_ray.ingest.record import DOCUMENT_RECORD
from kb_ray.ingest.rows import from_ipc
from kb_ray.ingest.stages.caption import CaptionStage
from kb_ray.ingest.stages.fetch import FetchStage
from kb_ray.ingest.stages.parse import ParseStage
from tests.conftest import GOLDEN_SOURCES
from tests.enrich.openai_server import CAPTION_WORDS, serve_openai
from tests.ingest.stage_inputs import pipeline_fp, source_table, stage_config, storage

MODEL = "kb-ray/test-vlm"


def parsed_documents(tmp_path, endpoint):
    config, _ = stage_config(tmp_path, "enrich.captions.enabled=true", "enrich.captions.backend=openai",
                             f"enrich.captions.endpoint={endpoint}", f"enrich.captions.model_id={MODEL}",
                             "enrich.captions.timeout_s=10", "enrich.captions.retries=0")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("figure.pdf", "notes.txt"):
        shutil.copy(GOLDEN_SOURCES / name, src / name)
    shutil.copy(GOLDEN_SOURCES / "figure.pdf", src / "figure_copy.pdf")  # the same crop in a second document
    table = source_table([src / "figure.pdf", src / "notes.txt", src / "figure_copy.pdf"])
    table, _ = FetchStage(storage_options=config.storage_options, pipeline_fp=pipeline_fp(config)).run(table)
    table, _ = ParseStage(**storage(config), parse=config.parse, chunking=config.chunking, run_id="run_t",
                          captions=config.enrich.captions).run(table)
    return config, table


def test_each_distinct_crop_is_captioned_once_and_becomes_a_chunk(tmp_path):
    with serve_openai(model=MODEL) as server:
        config, documents = parsed_documents(tmp_path, server.base_url)
        stage = CaptionStage(**storage(config), captions=config.enrich.captions, run_id="run_t")
        out, stats = stage.run(documents)
        assert len(server.requests) == 1
    assert out.schema == DOCUMENT_RECORD and stats.counts == {"captions_computed": 1, "captions_cached": 0,
                                                              "captions_failed": 0, "captions_skipped": 0}
    enrichments = out.column("enrichments_ipc").to_pylist()
    assert enrichments[1:] == [None, None]  # the new row travels once, on the first document showing the crop
    (row,) = from_ipc(enrichments[0]).to_pylist()
    assert row["status"] == "ok" and CAPTION_WORDS in row["text"]
    for index in (0, 2):
        kinds = from_ipc(out.column("chunks_ipc")[index].as_py()).column("kind").to_pylist()
        assert kinds.count("figure_description") == 1
        assert out.column("n_chunks")[index].as_py() == documents.column("n_chunks")[index].as_py() + 1
    assert out.column("notes").to_pylist() == [[], [], []]


def test_a_failed_caption_is_a_note_and_a_count_not_a_failure(tmp_path):
    with serve_openai(model=MODEL, always_fail=True) as server:
        config, documents = parsed_documents(tmp_path, server.base_url)
        out, stats = CaptionStage(**storage(config), captions=config.enrich.captions, run_id="run_t").run(documents)
    assert stats.counts["captions_failed"] == 1 and stats.counts["captions_computed"] == 0
    assert out.column("status").to_pylist() == ["ok", "ok", "ok"]
    notes = out.column("notes").to_pylist()
    assert notes[0][0].startswith("1 figure caption(s) failed (") and notes[1:] == [[], []]
