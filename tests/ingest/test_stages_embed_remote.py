"""EmbedWriteStage with a remote embedder (no Ray): usage in the stage's counts, per call; a
server that fails after its retries fails the micro-batch with the reason code."""

from __future__ import annotations

import shutil

import pytest

from kb_ray.embedding.remote import RemoteEmbeddingError
from kb_ray.errors import KbRayError
from kb_ray.index.vector_layout import VectorLayout
from kb_ray.ingest.stages.embed_write import EmbedWriteStage
from kb_ray.ingest.stages.fetch import FetchStage
from kb_ray.ingest.stages.parse import ParseStage
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.stage_inputs import pipeline_fp, source_table, stage_config, storage
from tests.model_server import bag_of_words, serve_models

MODEL = "kb-ray/test-embedder"


@pytest.fixture
def server():
    with serve_models(model=MODEL, embed=bag_of_words) as running:
        yield running


def parsed(config, tmp_path, name: str):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    shutil.copy(GOLDEN_SOURCES / name, src / name)
    table, _ = FetchStage(storage_options=config.storage_options, pipeline_fp=pipeline_fp(config)).run(
        source_table([src / name]))
    table, _ = ParseStage(**storage(config), parse=config.parse, chunking=config.chunking, run_id="run_t").run(table)
    return table


def test_remote_usage_is_in_the_stage_counts_of_each_call(server, tmp_path):
    config, _ = stage_config(tmp_path, "embedding.runtime=remote", f"embedding.endpoint={server.base_url}",
                             f"embedding.model_id={MODEL}", "embedding.batch_size=2", "parse.isolate=false",
                             f"embedding.cache_dir={tmp_path / 'cache'}")
    stage = EmbedWriteStage(**storage(config), embedding=config.embedding)
    _, stats = stage.run(parsed(config, tmp_path, "notes.txt"))
    computed = stats.counts["embeddings_computed"]
    assert computed > 0 and stats.counts["embed_requests"] == -(-computed // 2)  # the probe is not counted
    assert stats.counts["embed_prompt_tokens"] > computed and stats.counts["embed_retries"] == 0
    server.set(fail_times=1, fail_status=429)
    _, again = stage.run(parsed(config, tmp_path, "guide.md"))
    assert again.counts["embed_requests"] == -(-again.counts["embeddings_computed"] // 2)
    assert again.counts["embed_retries"] == 1


def test_a_failing_server_fails_the_micro_batch_with_its_reason(server, tmp_path):
    config, catalog = stage_config(tmp_path, "embedding.runtime=remote", f"embedding.endpoint={server.base_url}",
                                   f"embedding.model_id={MODEL}", "embedding.retries=1", "parse.isolate=false",
                                   f"embedding.cache_dir={tmp_path / 'cache'}")
    stage = EmbedWriteStage(**storage(config), embedding=config.embedding)
    table = parsed(config, tmp_path, "notes.txt")
    server.set(fail_times=10, fail_status=502)
    with pytest.raises(RemoteEmbeddingError, match=r"\(http_5xx\): HTTP 502 after 2 attempt") as caught:
        stage.run(table)
    assert caught.value.reason == "http_5xx" and catalog.read("embeddings").num_rows == 0


def test_the_late_layout_is_refused_with_a_remote_embedder(server, tmp_path):
    """A served model answers sentence vectors, not token states: the late layout says so at the
    first chunk that needs pooling; the texts it embeds count no local tokens (the server's own
    count is in embed_prompt_tokens)."""
    config, _ = stage_config(tmp_path, "embedding.runtime=remote", f"embedding.endpoint={server.base_url}",
                             f"embedding.model_id={MODEL}", "parse.isolate=false",
                             f"embedding.cache_dir={tmp_path / 'cache'}")
    stage = EmbedWriteStage(**storage(config), embedding=config.embedding, vector_layout=VectorLayout("late", 120))
    assert stage.embedder.count_tokens(["a text"]) == 0
    with pytest.raises(KbRayError, match="late needs a local embedding model"):
        stage.run(parsed(config, tmp_path, "manual.pdf"))
