"""Delta segments (kb_ray/index/refresh.py): base + segments search exactly like a full
build_index at the same catalog versions, on catalogs written straight to Delta (no Ray)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.catalog.contract import table_spec
from kb_ray.index import build_index, drop_generation, read_current
from kb_ray.index.refresh import compact_index, refresh_index
from kb_ray.index.segments import latest_segment, load_segments
from kb_ray.search import HybridSearcher
from tests.index_fixtures import REPO, SYNTHETIC_FP, golden_config

DIM = 16
WORDS = [f"w{i:02d}" for i in range(60)] + ["pump", "seal", "valve", "garden", "tunnel", "rail", "bike", "orchard"]
TABLES = ("documents", "versions", "chunks", "version_chunks", "embeddings")
FILTERS = (None, {"collection": "beta"}, {"tags_any": ["step1", "step3"]})


class Corpus:
    """Synthetic documents with random texts; ``write`` appends their rows to the catalog."""

    def __init__(self, root, seed: int = 0) -> None:
        self.catalog = DeltaCatalog.open(str(root))
        self.rng = np.random.default_rng(seed)
        self.documents: dict[str, dict] = {}
        self.changed: set[str] = set()  # keys written, deleted or re-tagged after the first write

    def _text(self) -> str:
        return " ".join(self.rng.choice(WORDS, size=int(self.rng.integers(3, 14))).tolist())

    def write(self, specs: list[tuple[str, int, str]], *, keep: dict[str, list[dict]] | None = None) -> None:
        """``(key, version, collection)`` per document: a new version with fresh chunks, plus
        ``keep[key]`` chunks reused from its previous version (same chunk id and embedding)."""
        rows = {name: [] for name in TABLES}
        for key, version, collection in specs:
            if key in self.documents:
                self.changed.add(key)
            self._version(rows, key, version, collection, (keep or {}).get(key, []))
        for name in TABLES[1:]:
            if rows[name]:
                self.catalog.append(name, pa.Table.from_pylist(rows[name], schema=table_spec(name).schema))
        self.upsert(rows["documents"])

    def _version(self, rows: dict, key: str, version: int, collection: str, kept: list[dict]) -> None:
        document_id, version_id = f"doc_{key}", f"ver_{key}_{version}"
        chunks = [*kept, *({"chunk_id": f"ch_{key}_{version}_{n}", "text": self._text(), "sha": f"sha_{key}_{version}_{n}",
                            "new": True} for n in range(int(self.rng.integers(1, 4))))]
        document = {"document_id": document_id, "collection": collection, "key": key, "uri": f"mem://{key}.txt",
                    "title": f"Title {key}", "mime": "text/plain", "tags": ["t"], "metadata_json": "{}",
                    "active_version_id": version_id, "created_at": datetime(2025, 1, 1, tzinfo=timezone.utc)}
        rows["documents"].append(document)
        rows["versions"].append({"version_id": version_id, "document_id": document_id, "status": "committed",
                                 "canonical_text": "\n\n".join(c["text"] for c in chunks), "mime": "text/plain",
                                 "title": f"Title {key}"})
        for ordinal, chunk in enumerate(chunks):
            if chunk.pop("new", False):
                rows["chunks"].append({"chunk_id": chunk["chunk_id"], "document_id": document_id, "text": chunk["text"],
                                       "heading_path": [f"Title {key}"], "embed_text_sha": chunk["sha"]})
                vector = self.rng.normal(size=DIM).astype(np.float32)
                rows["embeddings"].append({"embedder_fp": SYNTHETIC_FP, "embed_text_sha": chunk["sha"], "dim": DIM,
                                           "vector": (vector / np.linalg.norm(vector)).tolist()})
            rows["version_chunks"].append({"version_id": version_id, "chunk_id": chunk["chunk_id"], "ordinal": ordinal,
                                           "spans": [{"start": 0, "end": len(chunk["text"])}], "pages": [1],
                                           "regions": []})
        self.documents[key] = {"document": document, "chunks": chunks}

    def upsert(self, documents: list[dict]) -> None:
        schema = self.catalog.read("documents").schema
        self.catalog.merge_upsert("documents", pa.Table.from_pylist(documents, schema=schema), keys=["document_id"])

    def delete(self, key: str) -> None:
        self.changed.add(key)
        self.upsert([{**self.documents[key]["document"], "active_version_id": None}])

    def retag(self, key: str, tags: list[str]) -> None:
        self.changed.add(key)
        self.documents[key]["document"] = {**self.documents[key]["document"], "tags": tags, "title": f"Re {key}"}
        self.upsert([self.documents[key]["document"]])


def _config(root, *overrides):
    # candidates = k: a row that should be hidden would take a slot of every retriever's list
    return golden_config(root, "search.evidence=lexical", "search.candidates=10", "index.shards=2",
                         "index.compact_ratio=100", *overrides)


def _queries(seed: int = 3) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(" ".join(rng.choice(WORDS, size=int(rng.integers(1, 4))).tolist()),
             rng.normal(size=DIM).astype(np.float32)) for _ in range(24)]


def _hits(searcher: HybridSearcher, query: str, vector, mode: str, filters) -> list[tuple]:
    vector = np.ones(DIM, np.float32) if vector is None else vector
    hits = searcher.search(query, k=10, mode=mode, filters=filters, query_vector=vector).hits
    assert len({h["chunk_id"] for h in hits}) == len(hits), "a chunk twice: an older row was not hidden"
    return [(h["chunk_id"], h["version_id"], h["title"], h["score"], h["scores"]["dense"], h["scores"]["lexical"])
            for h in hits]


def _assert_same(actual: list[tuple], expected: list[tuple], label: str) -> None:
    assert [h[:3] for h in actual] == [h[:3] for h in expected], label
    for got, want in zip(actual, expected):
        for a, b in zip(got[3:], want[3:]):
            assert (a is None) == (b is None) and (a is None or abs(a - b) <= 1e-6), (label, got, want)


def _assert_equals_full_build(root, searcher: HybridSearcher, corpus: Corpus) -> None:
    config = _config(root, "index.switch_after_build=false")
    covered = load_segments(str(root), searcher.generation)[-1].catalog_versions
    full = HybridSearcher.open(config, generation_id=build_index(config, catalog_versions=covered).generation_id,
                               gate_max_age_s=600)
    searcher.gate.invalidate()  # the catalog changed since it was read (600 s cache: one read per test)
    compared, touched = 0, [k for k in corpus.documents if not k.startswith("d") or k in corpus.changed]
    targeted = [(corpus.documents[k]["chunks"][-1]["text"], None) for k in touched]  # the rewritten documents
    for query, vector in _queries()[:20] + targeted:
        for mode in ("dense", "lexical", "hybrid"):
            for filters in FILTERS:
                expected = _hits(full, query, vector, mode, filters)
                _assert_same(_hits(searcher, query, vector, mode, filters), expected, f"{query}/{mode}/{filters}")
                compared += bool(expected)
    assert compared > 100


@pytest.fixture()
def corpus(tmp_path):
    corpus = Corpus(tmp_path / "kb")
    corpus.write([(f"d{i:02d}", 1, ["alpha", "beta"][i % 2]) for i in range(30)])
    build_index(_config(tmp_path / "kb"))
    return corpus


def _change(corpus: Corpus, step: int) -> None:
    """New documents, a changed one keeping one chunk, a deleted one and a re-tagged one."""
    corpus.write([(f"n{step}{i}", 1, "beta") for i in range(3)])
    key = f"d{step:02d}"
    corpus.write([(key, 1 + step, "beta")], keep={key: corpus.documents[key]["chunks"][:1]})
    corpus.delete(f"d{10 + step:02d}")
    corpus.retag(f"d{20 + step:02d}", ["t", f"step{step}"])


def test_one_and_then_several_segments_equal_a_full_build(corpus, tmp_path):
    root = tmp_path / "kb"
    searcher = HybridSearcher.open(_config(root), gate_max_age_s=600)
    first_d01 = dict(corpus.documents["d01"]["document"])
    _change(corpus, 1)
    result = refresh_index(_config(root))
    assert (result.action, result.segment) == ("segment", 1)
    assert result.documents == 5  # 3 new, 1 changed, 1 re-tagged; the deleted one needs no rows
    assert searcher.refresh() and searcher.segment == 1
    lineage = searcher.search("w01", k=1, mode="lexical").hits[0]["lineage"]
    assert lineage["generation"] == searcher.generation
    assert lineage["catalog_versions"] == load_segments(str(root), searcher.generation)[-1].catalog_versions
    _assert_equals_full_build(root, searcher, corpus)
    for step in (2, 3, 4):
        _change(corpus, step)
        assert refresh_index(_config(root)).segment == step
    corpus.write([("d02", 9, "alpha")])  # a document of segment 2 changed again in segment 5
    corpus.upsert([first_d01])  # d01 back to the version the base holds (segment 1 holds its second one)
    last = refresh_index(_config(root))
    assert (last.segment, last.documents) == (5, 2)  # the reverted document is written again
    assert searcher.refresh() and searcher.segment == 5
    _assert_equals_full_build(root, searcher, corpus)
    fresh = HybridSearcher.open(_config(root), gate_max_age_s=600)  # loading all segments at once: the same
    query, vector = _queries()[0]
    assert _hits(fresh, query, vector, "hybrid", None) == _hits(searcher, query, vector, "hybrid", None)


def test_nothing_changed_writes_nothing(corpus, tmp_path):
    root = tmp_path / "kb"
    assert refresh_index(_config(root)).action == "none"
    assert latest_segment(str(root), read_current(str(root))) == 0


def test_only_a_tombstone_still_publishes_new_statistics(corpus, tmp_path):
    root = tmp_path / "kb"
    corpus.delete("d03")
    result = refresh_index(_config(root))
    assert (result.action, result.rows) == ("segment", 0)
    _assert_equals_full_build(root, HybridSearcher.open(_config(root), gate_max_age_s=600), corpus)


def test_compaction_folds_segments_into_a_new_base_and_the_old_one_can_be_dropped(corpus, tmp_path):
    root = tmp_path / "kb"
    base = read_current(str(root))
    _change(corpus, 1)
    covered = refresh_index(_config(root)).segment and load_segments(str(root), base)[-1].catalog_versions
    compacted = compact_index(_config(root))
    assert compacted.action == "compacted" and read_current(str(root)) == compacted.generation != base
    manifest = json.loads((root / "indexes" / compacted.generation / "manifest.json").read_text())
    assert {n: manifest["catalog_versions"][n] for n in TABLES} == covered
    assert drop_generation(str(root), base) and not (root / "indexes" / base).exists()
    assert refresh_index(_config(root)).action == "none"


def test_a_searcher_switching_to_a_compacted_generation_shows_its_new_documents_at_once(corpus, tmp_path):
    root = tmp_path / "kb"
    searcher = HybridSearcher.open(_config(root), gate_max_age_s=600)  # a gate cache that outlives the test
    assert searcher.search("w01", k=3, mode="lexical").hits  # the gate's active set is read and cached now
    corpus.write([("fresh", 1, "beta")])
    compacted = refresh_index(_config(root, "index.compact_ratio=0.01"))  # a segment, folded into a new base
    assert compacted.action == "compacted" and searcher.refresh() and searcher.generation == compacted.generation
    fresh = corpus.documents["fresh"]["chunks"][0]["text"]
    hits = searcher.search(fresh, k=5, mode="lexical").hits
    assert "doc_fresh" in {hit["document_id"] for hit in hits}


def test_segment_rows_over_the_ratio_compact_automatically(corpus, tmp_path):
    root = tmp_path / "kb"
    base = read_current(str(root))
    corpus.write([(f"n{i}", 1, "beta") for i in range(12)])
    result = refresh_index(_config(root, "index.compact_ratio=0.1"))
    assert result.action == "compacted" and read_current(str(root)) != base
    assert latest_segment(str(root), base) == 1  # the segment was published, then folded in


def test_cli_index_refresh_and_compact(corpus, tmp_path, capsys):
    from kb_ray.cli import main

    root = tmp_path / "kb"
    args = ["--config", str(REPO / "conf" / "local.yaml"), "--set", f"kb_root={root}", "--set", "index.shards=2",
            "--set", "index.compact_ratio=100", "--json"]
    assert main(["index", "refresh", *args]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == "none"
    _change(corpus, 1)
    assert main(["index", "refresh", *args]) == 0
    assert json.loads(capsys.readouterr().out) | {"detail": ""} == {
        "action": "segment", "generation": read_current(str(root)), "segment": 1, "rows": 8, "documents": 5,
        "detail": ""}
    base = read_current(str(root))
    assert main(["index", "compact", *args]) == 0
    compacted = json.loads(capsys.readouterr().out)
    assert compacted["action"] == "compacted" and compacted["generation"] == read_current(str(root)) != base


def test_segments_are_recorded_so_maintain_keeps_their_catalog_versions(corpus, tmp_path):
    from kb_ray.catalog.maintenance import generation_versions

    root = tmp_path / "kb"
    _change(corpus, 1)
    segment = refresh_index(_config(root))
    covered = load_segments(str(root), segment.generation)[-1].catalog_versions
    kept = generation_versions(DeltaCatalog.open(str(root), create=False))
    assert all(version in kept[table] for table, version in covered.items())
    rows = DeltaCatalog.open(str(root), create=False).read("index_generations").to_pylist()
    assert {(r["generation_id"], r["kind"]) for r in rows} >= {(f"{segment.generation}/seg_0001", "segment")}


def test_as_of_searches_the_segments_that_existed_at_the_point(corpus, tmp_path):
    """A point before segment 1 is searched with the base alone (d01 at its first version, the
    new n10 absent); the latest point with segment 1 (d01's second version, n10 found). Loading
    every segment for an old point would hide d01's base rows behind a version the past gate
    does not know, so d01 would vanish."""
    from kb_ray.search.as_of import AsOfSearchers

    root, config = tmp_path / "kb", _config(tmp_path / "kb")
    before = corpus.catalog.delta_table("documents").version()
    first_text = " ".join(chunk["text"] for chunk in corpus.documents["d01"]["chunks"])
    _change(corpus, 1)
    assert refresh_index(config).segment == 1
    after = corpus.catalog.delta_table("documents").version()
    live = HybridSearcher.open(config)
    searchers = AsOfSearchers(corpus.catalog, kb_root=str(root), make=live.at)

    def versions(as_of: dict, key: str, query: str) -> set[str]:
        hits = searchers.searcher_for(as_of).search(query, k=10, mode="lexical",
                                                    filters={"document_ids": [f"doc_{key}"]}).hits
        return {hit["version_id"] for hit in hits}

    new_text = " ".join(chunk["text"] for chunk in corpus.documents["n10"]["chunks"])
    assert versions({"catalog_version": before}, "d01", first_text) == {"ver_d01_1"}
    assert versions({"catalog_version": before}, "n10", new_text) == set()
    assert versions({"catalog_version": after}, "d01", first_text) == {"ver_d01_2"}
    assert versions({"catalog_version": after}, "n10", new_text) == {"ver_n10_1"}


def test_the_chunk_inspector_names_the_lineage_a_hit_has_with_segments(corpus, tmp_path):
    """``GET /v1/chunks/{id}``'s lineage (kb_ray/search/chunk_view.py) equals a hit's once segments
    are loaded: the newest segment's catalog versions, not the base's."""
    from kb_ray.search.chunk_view import chunk_view, live_manifest

    root = tmp_path / "kb"
    base_versions = json.loads((root / "indexes" / read_current(str(root)) / "manifest.json").read_text())
    _change(corpus, 1)
    assert refresh_index(_config(root)).segment == 1
    searcher = HybridSearcher.open(_config(root), gate_max_age_s=600)
    text = " ".join(chunk["text"] for chunk in corpus.documents["n10"]["chunks"])
    hit = searcher.search(text, k=1, mode="lexical", filters={"document_ids": ["doc_n10"]}).hits[0]
    view = chunk_view(corpus.catalog, hit["chunk_id"], manifest=live_manifest(str(root)))
    assert view["lineage"] == hit["lineage"]
    assert view["lineage"]["catalog_versions"] != base_versions["catalog_versions"]  # a segment's, newer
