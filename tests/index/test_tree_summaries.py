"""LLM-written section summaries (``index.tree_summaries: generator``, kb_ray/index/tree_summaries.py)
against a real local OpenAI-compatible server with scripted replies (tests/enrich/openai_server.py):
written once into ``enrichments``, reused by a rebuild, a failed call keeps the extractive summary."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError
from kb_ray.index import build_index
from kb_ray.index.generations import local_generation_dir
from kb_ray.index.tree_summaries import SUMMARY_KIND
from tests.enrich.openai_server import serve_openai
from tests.index.test_tree import DOCS, HashEmbedder
from tests.index_fixtures import golden_config, write_synthetic_catalog

MODEL = "kb-ray/test-llm"
NODES = 6  # the manual's root, Pump manual, Installation, Priming, Maintenance; the notes' root


def _config(root: Path, server=None, *overrides: str, **answer):
    config = golden_config(root, "index.tree=true", "index.shards=2", "index.tree_summaries=generator", *overrides)
    if server is None:
        return config
    return config.model_copy(update={"answer": AnswerSettings(generator="openai", endpoint=server.base_url,
                                                              model_id=MODEL, max_concurrency=1, **answer)})


def _nodes(root: Path, manifest):
    folder = Path(local_generation_dir(str(root), manifest.generation_id)) / "tree"
    return pq.read_table(folder / "nodes.parquet").to_pylist()


def test_summaries_are_written_once_and_reused_by_a_rebuild(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    extractive = build_index(golden_config(tmp_path / "kb", "index.tree=true", "index.shards=2",
                                           "index.switch_after_build=false"), text_embedder=HashEmbedder())
    replies = [f"Summary {n}: the section in brief." for n in range(NODES)]
    with serve_openai(model=MODEL, chat_replies=replies) as server:
        manifest = build_index(_config(tmp_path / "kb", server), text_embedder=HashEmbedder())
        requests = server.chat_requests()
    assert len(requests) == NODES and manifest.tree["summaries"]["summaries_written"] == NODES
    assert requests[0]["max_tokens"] == 96
    assert manifest.spec["tree"]["summary"] == "generator" and manifest.generation_id != extractive.generation_id
    assert "summary_enricher_fp" not in extractive.spec["tree"]
    user = requests[0]["messages"][1]["content"]
    assert user.startswith("Document: Title ") and "<section>" in user
    nodes = _nodes(tmp_path / "kb", manifest)
    assert sorted(n["summary"] for n in nodes) == sorted(replies)
    catalog = DeltaCatalog.open(str(tmp_path / "kb"), create=False)
    rows = catalog.dataset("enrichments").to_table().to_pylist()
    assert len(rows) == NODES and {(r["kind"], r["status"]) for r in rows} == {(SUMMARY_KIND, "ok")}

    with serve_openai(model=MODEL, chat_replies=[]) as server:  # asked again, it would answer 409
        again = build_index(_config(tmp_path / "kb", server, "index.shards=3"), text_embedder=HashEmbedder())
        assert server.chat_requests() == []
    assert again.generation_id != manifest.generation_id and again.tree["summaries"]["summaries_written"] == 0
    assert sorted(n["summary"] for n in _nodes(tmp_path / "kb", again)) == sorted(replies)


def test_a_failed_call_is_stored_failed_and_keeps_the_extractive_summary(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    extractive = build_index(golden_config(tmp_path / "kb", "index.tree=true", "index.shards=2",
                                           "index.switch_after_build=false"), text_embedder=HashEmbedder())
    with serve_openai(model=MODEL, always_fail=True) as server:
        manifest = build_index(_config(tmp_path / "kb", server, retries=0), text_embedder=HashEmbedder())
    assert manifest.tree["summaries"]["summaries_failed"] == NODES
    summaries = {n["node_id"]: n["summary"] for n in _nodes(tmp_path / "kb", manifest)}
    assert summaries == {n["node_id"]: n["summary"] for n in _nodes(tmp_path / "kb", extractive)}
    catalog = DeltaCatalog.open(str(tmp_path / "kb"), create=False)
    rows = catalog.dataset("enrichments").to_table().to_pylist()
    assert {(r["kind"], r["status"], r["error"]) for r in rows} == {(SUMMARY_KIND, "failed", "http_5xx")}


def test_generator_summaries_need_a_model_generator(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    with pytest.raises(KbRayError, match="tree_summaries=generator"):
        build_index(_config(tmp_path / "kb"), text_embedder=HashEmbedder())
