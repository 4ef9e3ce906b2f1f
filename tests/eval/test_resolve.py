"""Quote resolution: exact and whitespace-normalized matches, documents by file name, qrels
from overlapping chunk spans, and every golden quote against the golden catalog."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.eval.dataset import EvalQuery, load_dataset
from kb_ray.eval.resolve import (
    CanonicalTexts,
    GoldSpan,
    QuoteResolutionError,
    chunk_spans,
    find_quote,
    relevant_chunks,
    resolve_queries,
)
from tests.index_fixtures import synthetic_docs, write_synthetic_catalog

GOLDEN_QUERIES = Path(__file__).resolve().parents[2] / "golden" / "queries.jsonl"


@pytest.mark.parametrize("text, quote, spans, match", [
    ("the pump is not self-priming.", "not self-priming", [(12, 28)], "exact"),
    ("a b a b", "a b", [(0, 3), (4, 7)], "exact"),
    ("container berth at\nNorth Quay in 2029", "berth at North Quay", [(10, 29)], "whitespace"),
    ("two  spaces\tand tabs", "spaces and  tabs", [(5, 20)], "whitespace"),
    ("nothing here", "absent", [], None),
    ("Tân Cương", "Tân Cương", [(0, 9)], "exact"),
])
def test_find_quote(text, quote, spans, match):
    found, how = find_quote(text, quote)
    assert (found, how) == (spans, match)
    for start, end in found:
        assert " ".join(text[start:end].split()) == " ".join(quote.split())


def _query(qid: str, doc: str, quote: str) -> EvalQuery:
    return EvalQuery(id=qid, query="q", kind="factoid", answer="a", relevant=[{"doc": doc, "quote": quote}])


def test_resolution_and_qrels_on_a_synthetic_catalog(tmp_path):
    catalog = write_synthetic_catalog(tmp_path / "kb", synthetic_docs(3))
    texts = CanonicalTexts(catalog)
    queries = [_query("hit", "doc-001", "doc-001 part 1"), _query("nodoc", "doc-999", "x"),
               _query("noquote", "doc-000", "not in the text"), _query("twice", "doc-002", "common term")]
    resolution = resolve_queries(queries, texts)
    assert resolution.spans["hit"] == [GoldSpan("doc-001", "ver_doc-001", 58, 72, None, "exact")]
    assert [u.split(":")[0] for u in resolution.unresolved] == ["nodoc", "noquote"]
    assert "no active document with a uri ending in /doc-999" in resolution.unresolved[0]
    assert len(resolution.ambiguous) == 1 and len(resolution.spans["twice"]) == 3
    chunks = chunk_spans(catalog, ["ver_doc-001", "ver_doc-002"])
    assert relevant_chunks(resolution.spans["hit"], chunks) == {"ch_doc-001_1"}
    assert relevant_chunks(resolution.spans["twice"], chunks) == {"ch_doc-002_0", "ch_doc-002_1", "ch_doc-002_2"}


def test_each_gold_span_keeps_the_index_of_its_quote(tmp_path):
    texts = CanonicalTexts(write_synthetic_catalog(tmp_path / "kb", synthetic_docs(3)))
    query = EvalQuery(id="hop", query="q", kind="multi-hop", answer="a",
                      relevant=[{"doc": "doc-002", "quote": "doc-002 part 1"}, {"doc": "doc-001", "quote": "doc-001 part 1"}])
    spans = resolve_queries([query], texts).spans["hop"]
    assert [(g.doc, g.quote) for g in spans] == [("doc-002", 0), ("doc-001", 1)]  # all@k groups spans by quote


def test_unknown_version_raises(tmp_path):
    texts = CanonicalTexts(write_synthetic_catalog(tmp_path / "kb", synthetic_docs(1)))
    with pytest.raises(QuoteResolutionError, match="not in the catalog"):
        texts.text("ver_missing")


def test_every_golden_quote_resolves_exactly_once_inside_one_element(golden_kb):
    catalog = DeltaCatalog.open(golden_kb, create=False)
    texts = CanonicalTexts(catalog)
    queries = load_dataset(GOLDEN_QUERIES)
    resolution = resolve_queries(queries, texts)
    assert resolution.unresolved == [] and resolution.ambiguous == []
    assert resolution.normalized == [], "golden quotes are exact; whitespace folding is for re-flowed text layers"
    spans = [g for gold in resolution.spans.values() for g in gold]
    assert len(spans) == sum(len(q.relevant) for q in queries)
    elements = _elements(catalog, {g.version_id for g in spans})
    for gold in spans:
        inside = [e for e in elements[gold.version_id] if e["span_start"] <= gold.start and gold.end <= e["span_end"]]
        assert len(inside) == 1, f"{gold} crosses element boundaries"
        if gold.page is not None:
            assert gold.page in {r["page"] for r in inside[0]["regions"] or []}, gold
    chunks = chunk_spans(catalog, [g.version_id for g in spans])
    assert all(relevant_chunks(gold, chunks) for gold in resolution.spans.values() if gold)


def _elements(catalog: DeltaCatalog, version_ids: set[str]) -> dict[str, list[dict]]:
    table = catalog.read("elements", columns=["version_id", "span_start", "span_end", "regions"],
                         filter=pc.field("version_id").isin(sorted(version_ids)) & pc.field("span_start").is_valid())
    out: dict[str, list[dict]] = {}
    for row in table.to_pylist():
        out.setdefault(row["version_id"], []).append(row)
    return out
