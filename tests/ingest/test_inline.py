"""Small ingests in the driver process (kb_ray/ingest/inline.py): the same stages as the Ray
pipeline, so the same catalog; the heavy stages are kept for the next ingest of the process."""

from __future__ import annotations

import shutil

import pytest

from kb_ray.catalog.verify import verify_catalog
from kb_ray.ingest import inline
from kb_ray.ingest.run import run_ingest
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.corpus import small_corpus
from tests.ingest.helpers import catalog, ingest_config, log_rows, state


@pytest.mark.slow  # a Ray reference ingest beside the inline one; the default run has the one below
@pytest.mark.usefixtures("ray_session")
def test_an_inline_ingest_writes_the_catalog_the_ray_pipeline_writes(tmp_path):
    corpus = small_corpus(tmp_path / "src")
    shutil.copy(GOLDEN_SOURCES / "manual.pdf", corpus / "manual.pdf")
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.7 not really")
    on_ray = run_ingest(ingest_config(tmp_path / "ray", [corpus]))
    inline_config = ingest_config(tmp_path / "inline", [corpus], "ingest.inline_max_docs=10")
    assert inline.runs_inline(inline_config, documents=6)
    in_driver = run_ingest(inline_config)

    assert state(tmp_path / "inline") == state(tmp_path / "ray")
    assert in_driver.documents == on_ray.documents and in_driver.micro_batches == on_ray.micro_batches == 3
    assert in_driver.failure_reasons == on_ray.failure_reasons == {"corrupt": 1}
    assert {name: s["rows_in"] for name, s in in_driver.stages.items()} == \
        {name: s["rows_in"] for name, s in on_ray.stages.items()} == {"fetch": 6, "parse": 6, "embed_write": 6}
    assert in_driver.chunks == on_ray.chunks and in_driver.embeddings == on_ray.embeddings
    assert verify_catalog(catalog(tmp_path / "inline")).ok(strict=True)
    assert sorted(row["action"] for row in log_rows(tmp_path / "inline", in_driver.run_id)) == \
        sorted(row["action"] for row in log_rows(tmp_path / "ray", on_ray.run_id))


def test_the_next_inline_ingest_reuses_the_loaded_stages_and_a_large_one_goes_to_ray(tmp_path):
    corpus = tmp_path / "src"
    corpus.mkdir()
    shutil.copy(GOLDEN_SOURCES / "notes.txt", corpus / "notes.txt")
    config = ingest_config(tmp_path / "kb", [corpus], "ingest.inline_max_docs=1")
    run_ingest(config)
    kept = {name: stage for name, (_, stage) in inline._kept.items()}
    assert any(name.endswith("EmbedWriteStage") for name in kept)
    (corpus / "guide.md").write_bytes((GOLDEN_SOURCES / "guide.md").read_bytes())
    second = run_ingest(config)
    assert second.documents["new"] == 1 and second.stages["embed_write"]["rows_in"] == 1
    assert all(inline._kept[name][1] is stage for name, stage in kept.items())  # nothing loaded again
    assert not inline.runs_inline(config, documents=2)  # more than inline_max_docs: the Ray pipeline
    assert not inline.runs_inline(config.model_copy(update={"ingest": config.ingest.model_copy(
        update={"inline_max_docs": 0})}), documents=1)
