"""Delta segments end to end (slow: real ingest on Ray, real HTTP to Ray Serve on 127.0.0.1):
ingest with ``index.auto_refresh`` publishes a segment, the service picks it up within
``index.refresh_interval_s`` without build-index, and base + segments answer like a full
build at the same catalog versions."""

from __future__ import annotations

import random
import time

import httpx
import pytest

from kb_ray.index import build_index, read_current
from kb_ray.index.segments import latest_segment, load_segments
from kb_ray.ingest.run import run_ingest
from kb_ray.search import HybridSearcher
from kb_ray.serving.app import start_service, stop_service
from tests.index_fixtures import golden_config, text_embedder  # noqa: F401  (pytest fixture)
from tests.ingest.helpers import INLINE

pytestmark = pytest.mark.slow
PORT = 8779
URL = f"http://127.0.0.1:{PORT}"
WORDS = "pump seal valve pressure filter motor bearing invoice contract warranty schedule torque sensor".split()
REFRESH_S = 1.0
GATE_S = 2.0  # HybridSearcher's default gate cache (the service's searcher)


def _write(directory, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text, encoding="utf-8")


def _corpus(directory, rng: random.Random, count: int = 6) -> None:
    for number in range(count):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(8)]
        _write(directory, f"note-{number}.txt", f"Note {number}\n\n" + "\n\n".join(sentences) + "\n")


def _config(kb_root, sources, *overrides):
    return golden_config(kb_root, f"ingest.sources=[{sources}]", "embedding.num_threads=1", "search.evidence=lexical",
                         "index.auto_refresh=true", f"index.refresh_interval_s={REFRESH_S}",
                         "index.compact_ratio=100", INLINE, *overrides)


@pytest.fixture(scope="module")
def kb(ray_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("fresh")
    _corpus(root / "src", random.Random(3))
    config = _config(root / "kb", root / "src")
    assert run_ingest(config).status == "succeeded"
    build_index(config)
    return root, config


def test_ingest_refreshes_and_base_plus_segments_equal_a_full_build(kb, text_embedder):
    root, config = kb
    base = read_current(config.kb_root)
    _write(root / "src", "note-1.txt", "Note 1 rewritten\n\nThe torque sensor warranty covers the bearing.\n")
    (root / "src" / "note-2.txt").unlink()
    _write(root / "src", "added.txt", "Added\n\nA new invoice schedule for the valve and pump seal.\n")
    report = run_ingest(config)
    assert report.index_refresh["action"] == "segment" and read_current(config.kb_root) == base
    covered = load_segments(config.kb_root, base)[-1].catalog_versions
    full_config = config.model_copy(update={"index": config.index.model_copy(update={"switch_after_build": False})})
    full = HybridSearcher.open(config, generation_id=build_index(full_config, catalog_versions=covered).generation_id,
                               embedder=text_embedder)
    fresh = HybridSearcher.open(config, embedder=text_embedder)
    assert fresh.segment == latest_segment(config.kb_root, base) >= 1
    queries = [" ".join(random.Random(n).sample(WORDS, 2)) for n in range(20)]
    for query in queries:
        for mode in ("dense", "lexical", "hybrid"):
            for filters in (None, {"mime": "text/plain"}):
                got = fresh.search(query, k=8, mode=mode, filters=filters).hits
                want = full.search(query, k=8, mode=mode, filters=filters).hits
                assert [h["chunk_id"] for h in got] == [h["chunk_id"] for h in want], (query, mode)
                assert all(abs(a["score"] - b["score"]) <= 1e-6 for a, b in zip(got, want)), (query, mode)


def test_a_file_ingested_while_serving_is_found_within_the_refresh_delay(kb):
    root, config = kb
    start_service(config, port=PORT)
    try:
        first = httpx.post(f"{URL}/v1/search", json={"query": "pump", "k": 1}, timeout=60)
        assert first.status_code == 200, first.text
        generation = first.json()["generation"]
        _write(root / "src", "zebra.txt", "Zebra crossing\n\nThe quokka marmalade protocol governs zebra crossings.\n")
        assert run_ingest(config).index_refresh["action"] == "segment"
        published, bound = time.monotonic(), REFRESH_S + GATE_S + 3.0  # + one search and segment load
        while True:
            result = httpx.post(f"{URL}/v1/search", json={"query": "quokka marmalade", "k": 3, "mode": "lexical"},
                                timeout=60).json()
            if any("quokka" in hit["text"] for hit in result["hits"]):
                break
            assert time.monotonic() - published < bound, "the new file was not searchable within the bound"
            time.sleep(0.2)
        assert result["generation"] == generation  # found through a segment, no build-index
    finally:
        stop_service()
