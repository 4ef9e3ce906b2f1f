"""The concept extractor (kb_ray/index/concepts.py) and ConceptStage (kb_ray/ingest/stages/concepts.py)
directly on Arrow tables: no Ray, no catalog."""

from __future__ import annotations

import pyarrow as pa

from kb_ray.index.concepts import ConceptExtractor, concept_id
from kb_ray.ingest.record import DOCUMENT_RECORD, conform_record
from kb_ray.ingest.rows import from_ipc, to_ipc, to_table
from kb_ray.ingest.stages.concepts import ConceptStage


def _keys(text: str) -> list[tuple[str, str]]:
    return [(c.key, c.kind) for c in ConceptExtractor().concepts(text)]


def test_terms_are_stemmed_stopwords_dropped_identifiers_kept_whole():
    keys = _keys("Replace the mechanical seals of os.path.join with --verbose, getScores")
    assert ("replac", "term") in keys and ("seal", "term") in keys and ("mechan seal", "phrase") in keys
    assert ("os.path.join", "identifier") in keys and ("--verbose", "identifier") in keys
    assert ("getscores", "identifier") in keys
    assert not any(key in ("the", "of", "with") for key, _ in keys)


def test_phrases_do_not_cross_stopwords_punctuation_or_numbers():
    keys = [key for key, kind in _keys("seal kit, pump housing of impeller 40 bolts") if kind == "phrase"]
    assert keys == ["seal kit", "pump hous"]


def _document(key: str, texts: list[str], *, status: str = "ok") -> dict:
    chunks = to_table("chunks", [{"chunk_id": f"ch_{key}_{n}", "document_id": f"doc_{key}", "text": text}
                                 for n, text in enumerate(texts)])
    return {"document_id": f"doc_{key}", "version_id": f"ver_{key}", "status": status,
            "chunks_ipc": to_ipc(chunks) if status == "ok" else None}


def test_the_stage_fills_concepts_and_mentions_beside_its_counts():
    batch = conform_record(pa.Table.from_pylist([
        _document("a", ["Replace the mechanical seal kit.", "The seal kit AF-SK-118 fits pump P-20."]),
        _document("b", ["A mechanical seal leaks when dry."]),
        _document("c", [], status="failed"),
    ]), DOCUMENT_RECORD)
    out, stats = ConceptStage().run(batch)
    assert out.num_rows == 3 and out.schema == DOCUMENT_RECORD
    assert out.column("mentions_ipc")[2].as_py() is None and out.column("concepts_ipc")[2].as_py() is None
    mentions_a = from_ipc(out.column("mentions_ipc")[0].as_py()).to_pylist()
    concepts_a = {row["key"]: row for row in from_ipc(out.column("concepts_ipc")[0].as_py()).to_pylist()}
    assert concepts_a["seal kit"]["chunks"] == 2 and concepts_a["seal kit"]["label"] == "seal kit"
    assert concepts_a["af-sk-118"]["kind"] == "identifier" and concepts_a["af-sk-118"]["label"] == "AF-SK-118"
    seal = concept_id("seal")
    assert {(m["chunk_id"], m["count"]) for m in mentions_a if m["concept_id"] == seal} == \
        {("ch_a_0", 1), ("ch_a_1", 1)}
    mentions_b = from_ipc(out.column("mentions_ipc")[1].as_py()).to_pylist()
    assert seal in {m["concept_id"] for m in mentions_b}  # one concept identity across documents
    assert {m["version_id"] for m in mentions_b} == {"ver_b"}
    assert len({m["extractor_fp"] for m in mentions_a + mentions_b}) == 1
    assert stats.stage == "concepts" and stats.rows_in == stats.rows_out == 3
    assert stats.counts["documents"] == 2 and stats.counts["chunks"] == 3
    assert stats.counts["mentions"] == len(mentions_a) + len(mentions_b)
