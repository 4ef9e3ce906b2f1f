"""The eval dataset schema, its validation errors, and the coverage of golden/queries.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb_ray.eval.dataset import KINDS, DatasetError, load_dataset

REPO = Path(__file__).resolve().parents[2]
GOLDEN_QUERIES = REPO / "golden" / "queries.jsonl"
GOOD = {"id": "q1", "query": "How heavy is it?", "kind": "factoid", "answer": "51 kg",
        "relevant": [{"doc": "manual.pdf", "quote": "AF-220L 3.0 24 48 51", "page": 1}]}


def _write(tmp_path: Path, *rows) -> Path:
    path = tmp_path / "queries.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_valid_lines_load(tmp_path):
    no_answer = {**GOOD, "id": "q2", "relevant": []}
    queries = load_dataset(_write(tmp_path, GOOD, "", no_answer))
    assert [q.id for q in queries] == ["q1", "q2"]
    assert queries[0].answerable and not queries[1].answerable
    assert queries[0].relevant[0].page == 1


@pytest.mark.parametrize("row, message", [
    ({**GOOD, "extra": 1}, "extra: Extra inputs are not permitted"),
    ({**GOOD, "kind": "trivia"}, "kind: Input should be"),
    ({k: v for k, v in GOOD.items() if k != "answer"}, "answer: Field required"),
    ({**GOOD, "relevant": [{"doc": "manual.pdf", "quote": "  ", "page": None}]}, "quote is blank"),
    ({**GOOD, "relevant": [{"doc": "manual.pdf", "quote": "x", "page": 0}]}, "page: Input should be greater"),
    ({**GOOD, "relevant": [{"doc": "manual.pdf", "quote": "x", "chunk_id": "ch_1"}]}, "chunk_id: Extra inputs"),
    ("{not json", "not valid JSON"),
])
def test_invalid_lines_name_the_line_and_field(tmp_path, row, message):
    with pytest.raises(DatasetError, match=message) as info:
        load_dataset(_write(tmp_path, GOOD | {"id": "ok"}, row))
    assert ":2:" in str(info.value)


def test_duplicate_ids_missing_and_empty_files(tmp_path):
    with pytest.raises(DatasetError, match="more than once"):
        load_dataset(_write(tmp_path, GOOD, GOOD))
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetError, match="no queries"):
        load_dataset(_write(tmp_path, ""))


def test_golden_queries_cover_every_document_and_kind():
    queries = load_dataset(GOLDEN_QUERIES)
    answerable = [q for q in queries if q.answerable]
    assert len(answerable) >= 60 and len(queries) - len(answerable) >= 10
    sources = {p.name for p in (REPO / "golden" / "sources").iterdir()}
    assert {r.doc for q in answerable for r in q.relevant} == sources
    assert {q.kind for q in answerable} == set(KINDS)


def test_golden_quotes_are_short_and_queries_paraphrase_them():
    for query in load_dataset(GOLDEN_QUERIES):
        for gold in query.relevant:
            assert 1 <= len(gold.quote.split()) <= 16, (query.id, gold.quote)
            assert "|" not in gold.quote, f"{query.id}: a quote must not cross table cells"
            assert gold.quote.lower() not in query.query.lower(), f"{query.id} copies its quote"
