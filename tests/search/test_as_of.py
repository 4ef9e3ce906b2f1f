"""As-of resolution and search over real Delta commits in tmp_path (no Ray): timestamps through
the Delta log, the covering generation, the gate at a past documents version, and 409s."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from kb_ray.catalog import DeltaCatalog
from kb_ray.catalog.time_travel import CommitTimeline, parse_timestamp
from kb_ray.index import build_index, drop_generation
from kb_ray.search import HybridSearcher
from kb_ray.search.as_of import AsOfError, AsOfSearchers, NoCoveringGeneration, choose_target
from tests.index_fixtures import golden_config, synthetic_docs, write_synthetic_catalog

GONE = "doc_doc-002"


def _now() -> datetime:
    time.sleep(0.02)  # commit timestamps are milliseconds: keep points apart
    moment = datetime.now(timezone.utc)
    time.sleep(0.02)
    return moment


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    root = tmp_path_factory.mktemp("asof") / "kb"
    before_catalog = _now()
    catalog = write_synthetic_catalog(root, synthetic_docs(10))
    config = golden_config(root, "index.shards=1", "search.evidence=lexical")
    first = build_index(config)
    built = _now()
    first_docs = catalog.delta_table("documents").version()
    rows = catalog.read("documents").to_pylist()
    gone = [{**row, "active_version_id": None, "deleted_at": datetime.now(timezone.utc)}
            for row in rows if row["document_id"] == GONE]
    catalog.merge_upsert("documents", pa.Table.from_pylist(gone, schema=catalog.read("documents").schema),
                         keys=["document_id"])
    deleted = _now()
    return {"config": config, "catalog": catalog, "first": first, "first_docs": first_docs,
            "deleted_docs": catalog.delta_table("documents").version(),
            "before_catalog": before_catalog, "built": built, "deleted": deleted}


def _target(kb, as_of, **kw):
    return choose_target(kb["catalog"], as_of, kb_root=kb["config"].kb_root, **kw)


def _finds_gone(kb, target) -> bool:
    searcher = HybridSearcher.open(kb["config"], generation_id=target.generation_id,
                                   gate_version=target.documents_version)
    hits = searcher.search("common term", k=5, mode="lexical", filters={"document_ids": [GONE]}).hits
    return bool(hits) and all(hit["document_id"] == GONE for hit in hits)


def test_catalog_version_before_and_after_the_delete(kb):
    before = _target(kb, {"catalog_version": kb["first_docs"]})
    after = _target(kb, {"catalog_version": kb["deleted_docs"]})
    assert before.generation_id == after.generation_id == kb["first"].generation_id
    assert (before.documents_version, after.documents_version) == (kb["first_docs"], kb["deleted_docs"])
    assert _finds_gone(kb, before) and not _finds_gone(kb, after)
    live = HybridSearcher.open(kb["config"], gate_max_age_s=0.0)
    assert not live.search("common term", k=5, mode="lexical", filters={"document_ids": [GONE]}).hits


def test_timestamps_resolve_each_table_through_the_log(kb):
    at_build = _target(kb, {"timestamp": kb["built"].isoformat()})
    assert at_build.point["documents"] == kb["first_docs"]
    assert {name: at_build.point[name] for name in kb["first"].catalog_versions} == kb["first"].catalog_versions
    assert _finds_gone(kb, at_build)
    at_delete = _target(kb, {"timestamp": kb["deleted"].isoformat().replace("+00:00", "Z")})
    assert at_delete.documents_version == kb["deleted_docs"] and not _finds_gone(kb, at_delete)


def test_points_no_generation_covers_are_409s(kb):
    with pytest.raises(NoCoveringGeneration, match="no history"):
        _target(kb, {"timestamp": kb["before_catalog"].isoformat()})
    with pytest.raises(NoCoveringGeneration, match="no retained index generation"):
        _target(kb, {"catalog_version": kb["first_docs"] - 1})
    with pytest.raises(NoCoveringGeneration, match="another embedder"):
        _target(kb, {"catalog_version": kb["deleted_docs"]}, embedder_fp="fp_some_other_model")


@pytest.mark.parametrize("as_of, message", [
    ({"catalog_version": 1, "timestamp": "2026-01-01T00:00:00Z"}, "exactly one"), ({}, "exactly one"),
    ({"catalog_version": 10_000}, "version of the documents table"), ({"catalog_version": -1}, "0.."),
])
def test_malformed_points_are_refused(kb, as_of, message):
    with pytest.raises(AsOfError, match=message):
        _target(kb, as_of)


def test_the_newest_covering_generation_wins_and_a_dropped_one_is_skipped(tmp_path):
    root = tmp_path / "kb"
    catalog = write_synthetic_catalog(root, synthetic_docs(6))
    config = golden_config(root, "index.shards=1", "search.evidence=lexical")
    old = build_index(config)
    old_docs = catalog.delta_table("documents").version()
    catalog.append("documents", catalog.read("documents").slice(0, 1))  # a new documents version
    new = build_index(config)
    kb = {"catalog": catalog, "config": config}
    assert _target(kb, {"catalog_version": old_docs + 1}).generation_id == new.generation_id != old.generation_id
    assert _target(kb, {"catalog_version": old_docs}).generation_id == old.generation_id
    drop_generation(str(root), old.generation_id)
    with pytest.raises(NoCoveringGeneration):
        _target(kb, {"catalog_version": old_docs})


def test_commit_timeline_between_commits(tmp_path):
    catalog = DeltaCatalog.open(str(tmp_path / "kb"))
    before, after = [], []
    for n in range(3):
        before.append(_now())
        write_deltalake(catalog.delta_table("sources"), catalog.read("sources").slice(0, 0), mode="append")
        after.append(_now())
    timeline = CommitTimeline(catalog)
    assert [timeline.version_at("sources", s) for s in before] == [0, 1, 2]  # version 0: the table's creation
    assert [timeline.version_at("sources", s) for s in after] == [1, 2, 3]
    assert timeline.version_at("sources", datetime(2000, 1, 1, tzinfo=timezone.utc)) is None
    assert parse_timestamp("2026-01-02T03:04:05").tzinfo is timezone.utc


def test_as_of_searchers_cache_by_generation_and_gate_version(kb):
    made = []
    searchers = AsOfSearchers(kb["catalog"], kb_root=kb["config"].kb_root, size=1,
                              make=lambda **key: made.append(key) or HybridSearcher.open(kb["config"], **key))
    first = searchers.searcher_for({"catalog_version": kb["first_docs"]})
    assert searchers.searcher_for({"timestamp": kb["built"].isoformat()}) is first  # the same target
    searchers.searcher_for({"catalog_version": kb["deleted_docs"]})
    assert searchers.searcher_for({"catalog_version": kb["first_docs"]}) is not first  # evicted (size 1)
    assert [m["gate_version"] for m in made] == [kb["first_docs"], kb["deleted_docs"], kb["first_docs"]]
    with pytest.raises(AsOfError, match="ISO-8601"):
        searchers.searcher_for({"timestamp": "yesterday"})


def test_a_vacuumed_documents_version_is_a_409(tmp_path):
    root = tmp_path / "kb"
    catalog = write_synthetic_catalog(root, synthetic_docs(4))
    config = golden_config(root, "index.shards=1", "search.evidence=lexical")
    build_index(config)
    kept = catalog.delta_table("documents").version()
    rows = [{**row, "active_version_id": None} for row in catalog.read("documents").to_pylist()]
    catalog.merge_upsert("documents", pa.Table.from_pylist(rows, schema=catalog.read("documents").schema),
                         keys=["document_id"])
    catalog.delta_table("documents").vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    searchers = AsOfSearchers(catalog, kb_root=str(root), make=lambda **key: HybridSearcher.open(config, **key))
    with pytest.raises(NoCoveringGeneration, match="can no longer be read"):
        searchers.searcher_for({"catalog_version": kept})
