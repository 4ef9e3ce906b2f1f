"""Evidence, confidence, abstain and context on real hits of the golden catalog."""

from __future__ import annotations

import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.index import build_index
from kb_ray.search import HybridSearcher, SearchRequestError
from tests.index_fixtures import GOLDEN_QUERIES, golden_config


@pytest.fixture(scope="module")
def searcher(golden_kb, text_embedder):
    config = golden_config(golden_kb, "index.shards=1")
    manifest = build_index(config)
    return HybridSearcher.open(config, generation_id=manifest.generation_id, embedder=text_embedder)


@pytest.fixture(scope="module")
def canonical(golden_kb):
    versions = DeltaCatalog.open(golden_kb, create=False).read("versions", columns=["version_id", "canonical_text"])
    return dict(zip(versions.column("version_id").to_pylist(), versions.column("canonical_text").to_pylist()))


def _inside(inner, outer, slack=1e-3):
    return (outer[0] - slack <= inner[0] <= inner[2] <= outer[2] + slack
            and outer[1] - slack <= inner[1] <= inner[3] <= outer[3] + slack)


def test_evidence_quote_is_the_canonical_text_at_its_span_inside_the_chunk(searcher, canonical):
    checked = 0
    for query, _, _ in GOLDEN_QUERIES:
        for hit in searcher.search(query, k=10).hits:
            evidence = hit["evidence"]
            if hit["generated"]:
                assert evidence is None
                continue
            (start, end), = evidence["spans"]
            assert evidence["quote"] == canonical[hit["version_id"]][start:end] and evidence["quote"].strip()
            assert any(s <= start and end <= e for s, e in hit["spans"])
            checked += 1
    assert checked >= 9 * len(GOLDEN_QUERIES)


def test_pdf_evidence_points_at_lines_inside_the_chunk_regions(searcher):
    narrower = 0
    for query, filename, quote in GOLDEN_QUERIES:
        if not filename.endswith(".pdf"):
            continue
        for hit in searcher.search(query, k=5).hits:
            if not hit["uri"].endswith(".pdf"):
                continue  # a text file's hit has no boxes
            evidence = hit["evidence"]
            assert evidence["regions"] and set(evidence["pages"]) <= set(hit["pages"])
            for region in evidence["regions"]:
                assert any(r["page"] == region["page"] and _inside(region["bbox"], r["bbox"]) for r in hit["regions"])
            area = sum((r["bbox"][2] - r["bbox"][0]) * (r["bbox"][3] - r["bbox"][1]) for r in evidence["regions"])
            chunk_area = sum((r["bbox"][2] - r["bbox"][0]) * (r["bbox"][3] - r["bbox"][1]) for r in hit["regions"])
            narrower += area < 0.75 * chunk_area
    assert narrower >= 10  # multi-line chunks: the evidence boxes are the passage's lines, not the chunk's blocks


def test_known_answers_are_in_their_evidence(searcher):
    found = 0
    for query, filename, quote in GOLDEN_QUERIES:
        hit = next((h for h in searcher.search(query, k=5).hits if h["uri"].endswith(filename) and quote in h["text"]),
                   None)
        found += hit is not None and quote in hit["evidence"]["quote"]
    assert found >= 0.8 * len(GOLDEN_QUERIES)


def test_confidence_is_a_probability_and_abstain_a_flag(searcher):
    result = searcher.search("AquaFlow pump mechanical seal kit part number", k=5)
    assert isinstance(result.abstain, bool) and result.to_dict()["abstain"] is result.abstain
    assert all(0.0 <= hit["confidence"] <= 1.0 for hit in result.hits)
    nonsense = searcher.search("zebra quantum saxophone glacier", k=5)
    assert max(h["confidence"] for h in nonsense.hits) < max(h["confidence"] for h in result.hits)


def test_context_is_bounded_same_section_and_leaves_ranking_alone(searcher):
    query = "capital cost estimates for the freight rail route options"  # section 5 spans three chunks
    plain = searcher.search(query, k=5)
    with_context = searcher.search(query, k=5, context_chars=600)
    assert [h["chunk_id"] for h in plain.hits] == [h["chunk_id"] for h in with_context.hits]
    assert "context" not in plain.hits[0]
    for hit in with_context.hits:
        context = hit["context"]
        chunks = context["before"] + context["after"]
        assert context["chars"] == sum(len(c["text"]) for c in chunks) <= 600
        assert hit["chunk_id"] not in {c["chunk_id"] for c in chunks}
        assert all(c["ordinal"] < hit["ordinal"] for c in context["before"])
        assert all(c["ordinal"] > hit["ordinal"] for c in context["after"])
    assert any(hit["context"]["chars"] for hit in with_context.hits)
    with pytest.raises(SearchRequestError, match="context_chars"):
        searcher.search("tunnel", k=3, context_chars=10**9)


def test_confidence_rerank_orders_the_top_hits_by_confidence_and_keeps_the_rest(golden_kb, text_embedder):
    config = golden_config(golden_kb, "index.shards=1", "search.confidence_rerank=5")
    resorted = HybridSearcher.open(config, embedder=text_embedder)
    plain = HybridSearcher.open(golden_config(golden_kb, "index.shards=1"), embedder=text_embedder)
    query = GOLDEN_QUERIES[0][0]
    fused = plain.search(query, k=8).hits
    hits = resorted.search(query, k=8).hits
    head = [h["confidence"] for h in hits[:5]]
    assert head == sorted(head, reverse=True) and [h["ranks"]["confidence"] for h in hits[:5]] == [1, 2, 3, 4, 5]
    assert {h["chunk_id"] for h in hits[:5]} == {h["chunk_id"] for h in fused[:5]}
    assert [h["chunk_id"] for h in hits[5:]] == [h["chunk_id"] for h in fused[5:]]
    assert all("confidence" not in h["ranks"] for h in fused)
    assert "confidence" not in resorted.search(query, k=3, mode="dense").hits[0]["ranks"]  # hybrid only


class _CountingEmbedder:
    """The text embedder, recording what each search asks it to embed."""

    def __init__(self, embedder):
        self.embedder, self.calls = embedder, []

    def __getattr__(self, name):
        return getattr(self.embedder, name)

    def embed_query(self, text):
        self.calls.append(("query", text))
        return self.embedder.embed_query(text)

    def embed_texts(self, texts):
        self.calls.append(("texts", list(texts)))
        return self.embedder.embed_texts(texts)


def test_the_default_search_embeds_its_query_and_no_passage(golden_kb, text_embedder):
    """``search.evidence`` defaults to lexical (#12: embedding the first hits' sentences made a
    search ~20 times slower; benchmarks/results/eval.md): one query embedding per search."""
    counting = _CountingEmbedder(text_embedder)
    searcher = HybridSearcher.open(golden_config(golden_kb, "index.shards=1"), embedder=counting)
    query = GOLDEN_QUERIES[0][0]
    hits = searcher.search(query, k=10).hits
    assert counting.calls == [("query", query)]
    assert all(set(h["evidence"]["signals"]) == {"coverage"} for h in hits if h["evidence"])
    assert any(h["evidence"] for h in hits)


def test_a_request_may_ask_for_hybrid_evidence_and_gets_its_confidence_model(golden_kb, text_embedder):
    """``evidence="hybrid"`` on one search (what answers ask for, answer.evidence) gives what
    ``search.evidence: hybrid`` gives: the same passages, confidences and abstain flag."""
    query = GOLDEN_QUERIES[0][0]
    default = HybridSearcher.open(golden_config(golden_kb, "index.shards=1"), embedder=text_embedder)
    configured = HybridSearcher.open(golden_config(golden_kb, "index.shards=1", "search.evidence=hybrid"),
                                     embedder=text_embedder)
    asked, hybrid = default.search(query, k=10, evidence="hybrid"), configured.search(query, k=10)
    assert [(h["chunk_id"], h["evidence"], h["confidence"]) for h in asked.hits] == \
        [(h["chunk_id"], h["evidence"], h["confidence"]) for h in hybrid.hits]
    assert asked.abstain == hybrid.abstain and "cosine" in asked.hits[0]["evidence"]["signals"]
    lexical = default.search(query, k=10)
    assert [h["chunk_id"] for h in lexical.hits] == [h["chunk_id"] for h in asked.hits]  # evidence does not rank
    with pytest.raises(SearchRequestError, match="evidence"):
        default.search(query, k=10, evidence="dense")


def test_only_the_first_evidence_dense_hits_read_their_stored_vectors(golden_kb, text_embedder):
    query = GOLDEN_QUERIES[0][0]
    hybrid = ("index.shards=1", "search.evidence=hybrid")
    every = HybridSearcher.open(golden_config(golden_kb, *hybrid, "search.evidence_dense_hits=10"),
                                embedder=text_embedder).search(query, k=10).hits
    first3 = HybridSearcher.open(golden_config(golden_kb, *hybrid, "search.evidence_dense_hits=3"),
                                 embedder=text_embedder).search(query, k=10).hits
    assert [h["chunk_id"] for h in every] == [h["chunk_id"] for h in first3]  # ranking is untouched
    assert all("cosine" in h["evidence"]["signals"] for h in every)
    assert [("cosine" in h["evidence"]["signals"]) for h in first3] == [True] * 3 + [False] * 7
    assert [h["evidence"] for h in first3[:3]] == [h["evidence"] for h in every[:3]]


def test_hybrid_evidence_embeds_the_query_alone_and_reads_cosines_the_index_stores(searcher, golden_kb,
                                                                                   text_embedder):
    query = GOLDEN_QUERIES[0][0]
    counting = _CountingEmbedder(text_embedder)
    hybrid = HybridSearcher.open(golden_config(golden_kb, "index.shards=1", "search.evidence=hybrid"),
                                 generation_id=searcher.generation, embedder=counting)
    hits = hybrid.search(query, k=10).hits
    assert counting.calls == [("query", query)]  # before #38: every sentence of the first 6 hits as well
    cosines = [h["evidence"]["signals"]["cosine"] for h in hits[:6]]
    assert all(-1.0 <= c <= 1.0 for c in cosines) and len(set(cosines)) > 1
    top = hits[0]  # its window's cosine lies within the cosines of the vectors stored for it
    shard = hybrid._loaded.shards[0]
    stored = shard.row_vectors(shard.chunk_ids.index(top["chunk_id"])) @ text_embedder.embed_query(query)
    assert stored.min() - 1e-4 <= cosines[0] <= stored.max() + 1e-4
    assert top["scores"]["dense"] == pytest.approx(float(stored.max()), abs=1e-4)


def test_an_overlong_query_is_refused_before_it_is_embedded(searcher):
    with pytest.raises(SearchRequestError, match="max_query_chars"):
        searcher.search("seal " * 1000, k=5)
