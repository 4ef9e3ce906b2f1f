"""BM25 scores and rankings do not depend on the sharding or on where the corpus lives.

A synthetic catalog written straight to Delta (no Ray) imitates an ingest of files under
a folder: document and chunk ids are hashes of the absolute path, as the ingest makes
them, so moving the folder changes every id and every chunk's shard. Texts repeat on
purpose so that equal scores occur and the tie order is exercised.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.config import load_config
from kb_ray.index import build_index
from kb_ray.index.bm25 import Bm25Matrix, CorpusStatistics
from kb_ray.search import HybridSearcher
from tests.index_fixtures import REPO, SYNTHETIC_FP, _schema

DIM = 8
SENTENCES = [
    "Install the package with apt-get install nginx and restart the service.",
    "The configuration lives in /etc/nginx/nginx.conf; run nginx -t to check it.",
    "Set worker_processes to auto and keepalive_timeout to 65 seconds.",
    "Use os.path.join to build paths; version 8.4 deprecates the old call.",
    "The --no-install-recommends option keeps the system small.",
    "Pumps must run below 8 bar; order the seal kit AF-SK-118 for repairs.",
    "Backups run nightly; the retention period is 30 days.",
    "Restart the service after changing the configuration.",
]
QUERIES = ["restart the service", "nginx configuration check", "seal kit AF-SK-118", "os.path.join 8.4",
           "retention of backups", "install recommends option"]


def _doc_rows(folder: str, d: int) -> dict[str, list]:
    uri = f"file://{folder}/doc-{d:02d}.md"
    document_id = "doc_" + hashlib.sha256(uri.encode()).hexdigest()[:16]
    version_id = "ver_" + document_id[4:]
    texts = [SENTENCES[(d * 3 + n) % len(SENTENCES)] for n in range(3)]  # sentences repeat across documents
    rows = {"documents": [{"document_id": document_id, "collection": "docs", "key": uri, "uri": uri,
                           "title": f"doc-{d:02d}", "mime": "text/markdown", "tags": [], "metadata_json": "{}",
                           "active_version_id": version_id,
                           "created_at": datetime(2025, 1, 1, tzinfo=timezone.utc)}],
            "versions": [{"version_id": version_id, "document_id": document_id, "status": "committed",
                          "canonical_text": "\n\n".join(texts), "mime": "text/markdown", "title": f"doc-{d:02d}"}],
            "chunks": [], "version_chunks": [], "embeddings": []}
    start = 0
    for n, text in enumerate(texts):
        heading = [f"Section {n % 2}"]
        chunk_id = "ch_" + hashlib.sha256(f"{document_id}:{n}".encode()).hexdigest()[:16]
        sha = hashlib.sha256(f"{heading}{text}".encode()).hexdigest()
        vector = np.random.default_rng(int(sha[:8], 16)).normal(size=DIM).astype(np.float32)  # content-derived
        rows["chunks"].append({"chunk_id": chunk_id, "document_id": document_id, "text": text,
                               "heading_path": heading, "embed_text_sha": sha})
        rows["version_chunks"].append({"version_id": version_id, "chunk_id": chunk_id, "ordinal": n,
                                       "spans": [{"start": start, "end": start + len(text)}], "pages": [1],
                                       "regions": []})
        if sha not in {e["embed_text_sha"] for e in rows["embeddings"]}:
            rows["embeddings"].append({"embedder_fp": SYNTHETIC_FP, "embed_text_sha": sha, "dim": DIM,
                                       "vector": (vector / np.linalg.norm(vector)).tolist()})
        start += len(text) + 2
    return rows


def _catalog(kb_root, folder: str, documents: int = 12) -> None:
    catalog = DeltaCatalog.open(str(kb_root))
    tables: dict[str, list] = {}
    seen_shas: set[str] = set()
    for d in range(documents):
        for name, rows in _doc_rows(folder, d).items():
            if name == "embeddings":
                rows = [r for r in rows if r["embed_text_sha"] not in seen_shas]
                seen_shas.update(r["embed_text_sha"] for r in rows)
            tables.setdefault(name, []).extend(rows)
    for name, rows in tables.items():
        catalog.append(name, pa.Table.from_pylist(rows, schema=_schema(name)))


def _rankings(kb_root, *overrides: str, modes=("lexical", "hybrid")) -> dict:
    """Per query and mode: [(file name, heading path, text, lexical score, returned score)]."""
    config = load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={kb_root}", *overrides])
    build_index(config)
    searcher = HybridSearcher.open(config)
    vector = np.full(DIM, 1 / np.sqrt(DIM), np.float32)
    out = {}
    for query in QUERIES:
        for mode in modes:
            hits = searcher.search(query, k=10, mode=mode, query_vector=vector if mode != "lexical" else None).hits
            out[(query, mode)] = [(h["uri"].rsplit("/", 1)[-1], h["heading_path"], h["text"],
                                   h["scores"]["lexical"], round(h["score"], 12)) for h in hits]
    return out


@pytest.fixture(scope="module")
def one_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("lex") / "kb"
    _catalog(root, "/data/manuals")
    return root


@pytest.mark.parametrize("fusion", ["rrf", "minmax"])
def test_one_and_three_shards_give_identical_scores_and_rankings(one_folder, fusion):
    one = _rankings(one_folder, "index.shards=1", f"search.fusion={fusion}")
    three = _rankings(one_folder, "index.shards=3", f"search.fusion={fusion}")
    assert one == three
    assert any(len({hit[3] for hit in hits}) < len(hits) for hits in one.values())  # ties did occur
    assert all(one[(q, "lexical")] for q in QUERIES)


def test_the_same_files_under_another_folder_rank_identically(one_folder, tmp_path):
    moved = tmp_path / "kb"
    _catalog(moved, "/home/someone/elsewhere/copy")
    assert _rankings(one_folder, "index.shards=2") == _rankings(moved, "index.shards=2")


def test_baseline_bm25s_scores_do_depend_on_the_sharding(one_folder):
    one = _rankings(one_folder, "index.shards=1", "index.lexical=bm25s", modes=("lexical",))
    three = _rankings(one_folder, "index.shards=3", "index.lexical=bm25s", modes=("lexical",))
    assert one != three  # what the bm25 index fixes: per-shard idf and average length


def test_a_row_scores_the_same_in_a_split_matrix_with_shared_statistics():
    rows = [["nginx", "restart", "service"], ["service", "config"], ["nginx", "nginx", "log"], ["pump", "seal"]]
    stats = CorpusStatistics.of(rows)
    whole = Bm25Matrix.build(rows, stats).scores(["nginx", "service"])
    left, right = Bm25Matrix.build(rows[:1], stats), Bm25Matrix.build(rows[1:], stats)
    split = np.concatenate([left.scores(["nginx", "service"]), right.scores(["nginx", "service"])])
    assert np.array_equal(whole, split) and whole[3] == 0 and whole[0] > whole[1] > 0
    assert json.dumps(stats.document_frequency, sort_keys=True) == json.dumps(
        {"config": 1, "log": 1, "nginx": 2, "pump": 1, "restart": 1, "seal": 1, "service": 2}, sort_keys=True)


def test_a_rebuilt_bm25_index_has_byte_identical_files(tmp_path):
    from kb_ray.index.analyzer import TextAnalyzer
    from kb_ray.index.channels import ChannelBm25Index, channel_statistics, lexical_channels

    table = pa.table({"text": SENTENCES, "heading_path": [["H"]] * len(SENTENCES), "title": ["T"] * len(SENTENCES),
                      "uri": ["file:///x/a.md"] * len(SENTENCES)})
    files = []
    for n in range(2):
        channels = lexical_channels(table, TextAnalyzer())
        index = ChannelBm25Index.build(channels, channel_statistics(channels), tie_keys=[str(i) for i in range(8)],
                                       analyzer=TextAnalyzer())
        index.save(tmp_path / str(n))
        files.append({p.name: p.read_bytes() for p in sorted((tmp_path / str(n)).iterdir())})
    assert files[0] == files[1] and "body.terms.txt" in files[0]
    loaded = ChannelBm25Index.load(tmp_path / "0")
    assert np.array_equal(loaded.scores("restart the service"), index.scores("restart the service"))
