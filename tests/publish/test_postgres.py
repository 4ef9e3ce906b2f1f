"""``kb-ray publish postgres`` against a real Postgres with pgvector and the real golden catalog."""

from __future__ import annotations

import json

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.index import build_index
from kb_ray.index.generations import local_generation_dir
from kb_ray.publish.postgres import PostgresPublisher, hybrid_search, passage_table_name, table_name
from kb_ray.search import HybridSearcher
from tests.index_fixtures import copy_kb, golden_config
from tests.publish.searcher_passages import assert_same_passages, searcher_passages, table_passages

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("pgvector")


def _connect(dsn: str):
    from pgvector.psycopg import register_vector

    connection = psycopg.connect(dsn, autocommit=True)
    register_vector(connection)
    return connection


@pytest.fixture
def kb(golden_kb, tmp_path):
    """A private copy of the golden catalog with a one-shard generation live."""
    root = copy_kb(golden_kb, tmp_path / "kb")
    build_index(golden_config(root, "index.shards=1"))
    return root


def _index_vectors(config, manifest) -> dict[str, np.ndarray]:
    folder = local_generation_dir(config.kb_root, manifest.generation_id)
    vectors = {}
    for info in manifest.shards:
        ids = pq.read_table(folder / info.dir / info.hydration, columns=["chunk_id"]).column(0).to_pylist()
        index = faiss.read_index(str(folder / info.dir / info.dense))
        vectors.update(zip(ids, index.reconstruct_n(0, index.ntotal)))
    return vectors


def _generation_passages(config, manifest) -> int:
    """Passage vectors in the generation's files: dense_owners entries past each shard's rows."""
    folder = local_generation_dir(config.kb_root, manifest.generation_id)
    return sum(len(np.load(folder / info.dir / info.dense_owners)) - info.rows
               for info in manifest.shards if info.dense_owners)


def _served_passages(config) -> dict[str, list[np.ndarray]]:
    return searcher_passages(HybridSearcher.open(config, embedder=object(), gate_max_age_s=0.0))


def test_publish_golden_writes_every_chunk_with_its_index_vector(kb, postgres_dsn):
    config = golden_config(kb, "index.shards=1")
    manifest = build_index(config)
    result = PostgresPublisher(config, postgres_dsn).publish()
    assert result.action == "published" and result.switched
    assert result.table == table_name(manifest.generation_id, 0)
    assert result.rows == result.copied_rows == manifest.rows > 100
    expected = _index_vectors(config, manifest)
    with _connect(postgres_dsn) as connection:
        rows = connection.execute("SELECT chunk_id, embedding, text, spans, tsv::text <> '' FROM kb_chunks").fetchall()
        indexes = {r[0] for r in connection.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s",
                                                     [result.table])}
        live = connection.execute("SELECT table_name, generation_id, rows FROM kb_publications WHERE live").fetchall()
    assert len(rows) == manifest.rows and {r[0] for r in rows} == set(expected)
    for chunk_id, vector, text, spans, has_terms in rows:
        np.testing.assert_allclose(vector.to_numpy(), expected[chunk_id], atol=1e-6)
        assert text and spans and all(set(span) == {"start", "end"} for span in spans) and has_terms
    assert any("hnsw" in d and "vector_cosine_ops" in d for d in indexes)
    assert any("gin" in d and "(tsv)" in d for d in indexes)
    assert live == [(result.table, manifest.generation_id, manifest.rows)]
    with _connect(postgres_dsn) as connection:  # kb-ray's order for ties, computed by Postgres from the row
        stored = _stored_tie_keys(connection)
    assert stored == _kb_ray_tie_keys(config) and len(set(stored.values())) == len(stored)


def test_publish_golden_writes_every_passage_vector_of_its_chunks(kb, postgres_dsn):
    config = golden_config(kb)  # the default index.passage_chars
    manifest = build_index(config)
    result = PostgresPublisher(config, postgres_dsn).publish()
    expected = _served_passages(config)
    with _connect(postgres_dsn) as connection:
        found = table_passages(connection)
        recorded = connection.execute("SELECT passages FROM kb_publications WHERE live").fetchone()[0]
        indexes = [r[0] for r in connection.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s",
                                                    [passage_table_name(result.table)])]
    assert result.passages == result.copied_passages == recorded == _generation_passages(config, manifest) > 0
    assert_same_passages(found, expected)
    assert any("hnsw" in d and "vector_cosine_ops" in d for d in indexes)


def _set_active(root: str, document_id: str, version_id: str | None) -> str | None:
    """Point the document at ``version_id`` (None: tombstone it); the version it had."""
    catalog = DeltaCatalog.open(root, create=False)
    documents = catalog.read("documents")
    row = [r for r in documents.to_pylist() if r["document_id"] == document_id][0]
    catalog.merge_upsert("documents", pa.Table.from_pylist([{**row, "active_version_id": version_id}],
                                                           schema=documents.schema), keys=["document_id"])
    return row["active_version_id"]


def _tombstone(root: str, document_id: str) -> None:
    _set_active(root, document_id, None)


def _edit_documents(root: str, change) -> None:
    """A metadata-only edit: ``change(row) -> row`` on every document row."""
    catalog = DeltaCatalog.open(root, create=False)
    documents = catalog.read("documents")
    rows = [change(dict(r)) for r in documents.to_pylist()]
    catalog.merge_upsert("documents", pa.Table.from_pylist(rows, schema=documents.schema), keys=["document_id"])


def _document_of(root: str, file_name: str) -> str:
    documents = DeltaCatalog.open(root, create=False).read("documents").to_pylist()
    return next(r["document_id"] for r in documents if r["uri"].endswith(file_name))


def _view(dsn: str) -> tuple[str, set[str]]:
    with _connect(dsn) as connection:
        definition = connection.execute("SELECT pg_get_viewdef('kb_chunks')").fetchone()[0]
        documents = {r[0] for r in connection.execute("SELECT DISTINCT document_id FROM kb_chunks")}
    return definition, documents


def test_republish_is_a_no_op_and_tombstones_and_new_generations_propagate(kb, postgres_dsn):
    config = golden_config(kb, "index.shards=1")
    publisher = PostgresPublisher(config, postgres_dsn, batch_rows=50)  # several COPY batches
    first = publisher.publish()
    again = publisher.publish()
    assert again.action == "unchanged" and not again.switched and again.copied_rows == again.deleted_rows == 0
    assert again.table == first.table and again.rows == first.rows

    manual = _document_of(kb, "manual.pdf")
    _tombstone(kb, manual)  # same generation, one document tombstoned since: its rows are deleted
    pruned = publisher.publish()
    assert pruned.action == "updated" and pruned.table == first.table and pruned.deleted_rows > 0
    assert pruned.rows == first.rows - pruned.deleted_rows and manual not in _view(postgres_dsn)[1]
    assert publisher.publish().action == "unchanged"

    notes = _document_of(kb, "notes.txt")
    _tombstone(kb, notes)
    second = build_index(config)  # new catalog versions: a new generation, a new table, the view switched
    result = publisher.publish()
    assert result.action == "published" and result.switched and result.generation_id == second.generation_id
    assert result.table != first.table and result.rows == second.rows
    definition, documents = _view(postgres_dsn)
    assert result.table in definition and not {manual, notes} & documents
    with _connect(postgres_dsn) as connection:
        tables = {r[0] for r in connection.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'kb_chunks_%'")}
        live = connection.execute("SELECT table_name FROM kb_publications WHERE live").fetchall()
    assert tables == {first.table, result.table} and live == [(result.table,)]  # old tables stay

    back = publisher.publish(first.generation_id)  # roll the view back: notes' rows go from that table too
    assert back.action == "updated" and back.switched and back.table == first.table and back.deleted_rows > 0
    assert not {manual, notes} & _view(postgres_dsn)[1] and first.table in _view(postgres_dsn)[0]
    dropped = publisher.publish(drop_old=True)
    assert dropped.action == "unchanged" and dropped.switched and dropped.dropped == [first.table]
    with _connect(postgres_dsn) as connection:
        assert connection.execute("SELECT to_regclass(%s)", [first.table]).fetchone()[0] is None
        assert connection.execute("SELECT to_regclass(%s)", [passage_table_name(first.table)]).fetchone()[0] is None
        assert connection.execute("SELECT count(*) FROM kb_publications").fetchone()[0] == 1
        tables = {r[0] for r in connection.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'kb_%'")}
        passages_view = connection.execute("SELECT pg_get_viewdef('kb_passages')").fetchone()[0]
    assert tables == {"kb_publications", result.table, passage_table_name(result.table)}
    assert passage_table_name(result.table) in passages_view


def _passages_of(connection, document_id: str) -> int:
    return connection.execute("SELECT count(*) FROM kb_passages p JOIN kb_chunks c ON c.chunk_id = p.chunk_id "
                              "WHERE c.document_id = %s", [document_id]).fetchone()[0]


def test_deleted_rows_take_their_passages_and_reactivated_rows_bring_them_back(kb, postgres_dsn):
    config = golden_config(kb)
    publisher = PostgresPublisher(config, postgres_dsn, batch_rows=50)
    first = publisher.publish()
    manual = _document_of(kb, "manual.pdf")
    with _connect(postgres_dsn) as connection:
        manual_passages = _passages_of(connection, manual)
        chunk_ids = [r[0] for r in connection.execute("SELECT chunk_id FROM kb_chunks WHERE document_id = %s",
                                                      [manual])]
    assert manual_passages > 0

    version = _set_active(kb, manual, None)
    pruned = publisher.publish()
    assert pruned.action == "updated" and pruned.passages == first.passages - manual_passages
    with _connect(postgres_dsn) as connection:  # gone by ON DELETE CASCADE, not by a view's join
        left = connection.execute("SELECT count(*) FROM kb_passages WHERE chunk_id = ANY(%s)", [chunk_ids])
        assert left.fetchone()[0] == 0
        assert_same_passages(table_passages(connection), _served_passages(config))

    _set_active(kb, manual, version)  # the same version active again: its rows and passages come back
    back = publisher.publish()
    assert back.action == "updated" and back.copied_rows == pruned.deleted_rows
    assert back.copied_passages == manual_passages and back.passages == first.passages
    with _connect(postgres_dsn) as connection:
        assert_same_passages(table_passages(connection), _served_passages(config))
        recorded = connection.execute("SELECT rows, passages FROM kb_publications WHERE live").fetchone()
    assert recorded == (first.rows, first.passages)


def test_a_publication_written_before_passage_tables_and_tie_keys_gets_both(kb, postgres_dsn):
    config = golden_config(kb)
    publisher = PostgresPublisher(config, postgres_dsn)
    first = publisher.publish()
    with _connect(postgres_dsn) as connection:  # the schema as publishing left it before both
        connection.execute("DROP VIEW kb_passages")
        connection.execute(f"DROP TABLE {passage_table_name(first.table)}")
        connection.execute("ALTER TABLE kb_publications DROP COLUMN passages")
        connection.execute("DROP VIEW kb_chunks")
        connection.execute(f"ALTER TABLE {first.table} DROP COLUMN tie_key")
        connection.execute(f"CREATE VIEW kb_chunks AS SELECT * FROM {first.table}")
    result = publisher.publish()
    assert result.action == "updated" and result.switched and result.rows == first.rows
    assert result.passages == result.copied_passages == first.passages
    with _connect(postgres_dsn) as connection:
        assert_same_passages(table_passages(connection), _served_passages(config))
        assert _stored_tie_keys(connection) == _kb_ray_tie_keys(config)  # through the view made again
        recorded = connection.execute("SELECT passages FROM kb_publications WHERE live").fetchone()[0]
        hits = hybrid_search(connection, np.ones(_live_dim(connection), np.float32), "pump", k=3)
    assert recorded == first.passages and len(hits) == 3
    assert publisher.publish().action == "unchanged"


def _stored_tie_keys(connection) -> dict[str, str]:
    return dict(connection.execute("SELECT chunk_id, tie_key FROM kb_chunks").fetchall())


def _kb_ray_tie_keys(config) -> dict[str, str]:
    from kb_ray.index.channels import tie_keys
    from kb_ray.publish.served import read_served_rows, resolve_generation

    rows = read_served_rows(config, resolve_generation(config, None)).rows
    return dict(zip(rows.column("chunk_id").to_pylist(), tie_keys(rows)))


def _live_dim(connection) -> int:
    return connection.execute("SELECT dim FROM kb_publications WHERE live").fetchone()[0]


def test_delta_segments_are_published_as_search_serves_them(kb, postgres_dsn):
    from kb_ray.index.refresh import refresh_index

    config = golden_config(kb, "index.shards=1")
    publisher = PostgresPublisher(config, postgres_dsn)
    base = publisher.publish()
    guide = _document_of(kb, "guide.md")
    _edit_documents(kb, lambda r: {**r, "tags": ["orchard"]} if r["document_id"] == guide else r)
    refreshed = refresh_index(config, compact=False)
    assert refreshed.action == "segment" and refreshed.segment == 1
    result = publisher.publish()
    assert result.action == "published" and result.segment == 1 and result.table == f"{base.table}_s0001"
    assert result.rows == base.rows  # the segment's rows replace the base rows of that document
    with _connect(postgres_dsn) as connection:
        tags = {tuple(r[0]) for r in connection.execute("SELECT tags FROM kb_chunks WHERE document_id = %s",
                                                          [guide])}
        count = connection.execute("SELECT count(*), count(DISTINCT chunk_id) FROM kb_chunks").fetchone()
    assert tags == {("orchard",)} and count == (base.rows, base.rows)


# -- hybrid search in Postgres: filters and parity with HybridSearcher --------------------------

REPORTS = ("manual.pdf", "long_report.pdf", "two_column.pdf")
TAGS = {"manual.pdf": ["pump", "ops"], "faq.html": ["bikes"], "guide.md": ["ops"], "notes.txt": []}


def _label(row: dict) -> dict:
    name = row["uri"].rsplit("/", 1)[-1]
    return {**row, "collection": "reports" if name in REPORTS else "default", "tags": TAGS.get(name, ["misc"]),
            "metadata_json": json.dumps({"team": "ops" if name.endswith(".pdf") else "docs"})}


@pytest.fixture(scope="module")
def published(golden_kb, tmp_path_factory, new_database, text_embedder):
    """The golden catalog with collections, tags and a declared metadata field; one shard; published."""
    from kb_ray.search import HybridSearcher

    root = copy_kb(golden_kb, tmp_path_factory.mktemp("published") / "kb")
    _edit_documents(root, _label)
    # evidence passages do not change the fused order (search.confidence_rerank is 0): skip their cost.
    # The default index.passage_chars: the publication holds the chunk and passage vectors kb-ray scores.
    config = golden_config(root, "index.shards=1", "index.filterable_metadata=[team]", "search.evidence=none")
    build_index(config)
    dsn = new_database()
    PostgresPublisher(config, dsn).publish()
    searcher = HybridSearcher.open(config, embedder=text_embedder)
    with _connect(dsn) as connection:
        yield connection, searcher


FILTERS = [
    {"collection": "reports"},
    {"collection": ["default"], "mime": "text/plain"},
    {"tags_any": ["ops", "bikes"]},
    {"tags_all": ["pump", "ops"]},
    {"mime": ["application/pdf", "text/markdown"]},
    {"metadata": {"team": "docs"}, "tags_any": ["misc"]},
    {"created_after": "2000-01-01", "collection": "reports"},
    {"tags_any": []},
    {"acl_any": ["team-a"], "document_ids": []},
    {"acl_any": ["team-a"]},
]


def _allowed_by_kb_ray(searcher, raw: dict) -> set[str]:
    from kb_ray.search.filters import parse_filters

    search_filter = parse_filters(raw, filterable_metadata=searcher.config.index.filterable_metadata)
    token, active = searcher.gate.snapshot()
    return {cid for shard in searcher._loaded.shards
            for cid, keep in zip(shard.chunk_ids, shard.mask(search_filter, gate_token=token, active_versions=active))
            if keep}


@pytest.mark.parametrize("raw", FILTERS, ids=[json.dumps(f, sort_keys=True) for f in FILTERS])
def test_sql_filters_allow_exactly_the_rows_kb_ray_allows(published, text_embedder, raw):
    from psycopg.types.json import Jsonb

    connection, searcher = published
    expected = _allowed_by_kb_ray(searcher, raw)
    allowed = {r[0] for r in connection.execute(
        "SELECT chunk_id FROM kb_chunks WHERE kb_filter_match(%s, collection, document_id, tags, mime, created_at, "
        "acl, metadata)", [Jsonb(raw)])}
    assert allowed == expected
    query = "pump maintenance and safety"
    hits = hybrid_search(connection, text_embedder.embed_query(query), query, k=10, filters=raw)
    assert {h["chunk_id"] for h in hits} <= expected and len(hits) == min(10, len(expected))  # filters before top-k


@pytest.mark.parametrize("raw, message", [
    ({"colour": "red"}, "unknown filter field colour"),
    ({"metadata": {"owner": "x"}}, "metadata field owner is not filterable"),
    ({"tags_any": "ops"}, "tags_any must be a list of strings"),
])
def test_sql_filter_errors_name_what_is_allowed(published, raw, message):
    connection, _ = published
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        hybrid_search(connection, np.ones(384, np.float32), "pump", filters=raw)


@pytest.mark.parametrize("text", ["C:\\Program Files\\x's & | ! (seal) <-> kit:* 'AF-SK-118'", "the of and", ""])
def test_query_text_is_plain_text_never_tsquery_syntax(published, text_embedder, text):
    connection, _ = published
    hits = hybrid_search(connection, text_embedder.embed_query("seal kit"), text, k=5)
    assert len(hits) == 5


def _golden_queries() -> list[str]:
    from tests.conftest import REPO_ROOT

    lines = (REPO_ROOT / "golden" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


# Measured on golden's 125 queries against kb-ray's default (passage vectors on), docs/publish.md
# "Parity": mean overlap@10 0.849 (min 0.3), top-1 agreement 0.864, the same from three checkout
# paths since ties fall by kb-ray's content tie key; by chunk_id (a hash of the source path) the
# agreement was 0.824 from one path and 0.768 from another. The dense ranks are the same (exact
# best cosine over the same vectors, the test below); the lexical ranks are not: Postgres' ts_rank
# (its own parser, no IDF, OR of the query's lexemes) against kb-ray's BM25 channels. The bounds
# leave 2 and 4 queries of room for float differences between machines.
MIN_MEAN_OVERLAP, MIN_TOP1 = 0.83, 0.83


@pytest.mark.parametrize("candidates", [100, 3])  # 3: a chunk's passages crowd the passage leg's first list
def test_dense_leg_ranks_like_kb_ray_dense_search_with_passages(published, text_embedder, candidates):
    """No query text: no lexical leg, so the function's order is its dense leg's (chunk and passage vectors)."""
    connection, searcher = published
    k = min(10, candidates)
    for query in _golden_queries():
        ours = [h["chunk_id"] for h in searcher.search(query, k=k, mode="dense").hits]
        theirs = hybrid_search(connection, text_embedder.embed_query(query), "", k=k, candidates=candidates)
        assert [h["chunk_id"] for h in theirs] == ours, query
        assert [h["dense_rank"] for h in theirs] == list(range(1, k + 1))


def test_hybrid_parity_with_kb_ray_on_golden_queries(published, text_embedder):
    connection, searcher = published
    overlaps, top1 = [], []
    for query in _golden_queries():
        ours = [h["chunk_id"] for h in searcher.search(query, k=10).hits]
        theirs = [h["chunk_id"] for h in hybrid_search(connection, text_embedder.embed_query(query), query, k=10)]
        assert len(theirs) == 10
        overlaps.append(len(set(ours) & set(theirs)) / 10)
        top1.append(ours[0] == theirs[0])
    mean_overlap, top1_rate = float(np.mean(overlaps)), float(np.mean(top1))
    print(f"postgres parity on {len(overlaps)} golden queries: overlap@10 {mean_overlap:.3f} "
          f"(min {min(overlaps):.1f}), top-1 agreement {top1_rate:.3f}")
    assert mean_overlap >= MIN_MEAN_OVERLAP and top1_rate >= MIN_TOP1


def test_cli_publishes_the_live_generation_and_reports_a_republish(kb, postgres_dsn, capsys, monkeypatch):
    from kb_ray.cli import main

    config_args = ["--set", f"kb_root={kb}", "--config", str(_local_yaml())]
    assert main(["publish", "postgres", "--dsn", postgres_dsn, "--json", *config_args]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["action"] == "published" and first["rows"] == first["copied_rows"] > 100 and first["rows_per_s"] > 0
    assert first["passages"] == first["copied_passages"] > 0
    monkeypatch.setenv("KB_RAY_POSTGRES_DSN", postgres_dsn)  # the DSN from the environment
    assert main(["publish", "postgres", "--generation", first["generation_id"], *config_args]) == 0
    again = capsys.readouterr().out
    assert "already published" in again and f"({first['rows']} rows, {first['passages']} passage vectors)" in again
    monkeypatch.delenv("KB_RAY_POSTGRES_DSN")
    assert main(["publish", "postgres", *config_args]) == 2


def _local_yaml():
    from tests.conftest import REPO_ROOT

    return REPO_ROOT / "conf" / "local.yaml"

