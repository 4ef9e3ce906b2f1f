"""The hydration gate's cache (kb_ray/search/gate.py) on a real Delta catalog: ``at_least`` makes a
gate re-read only when its cached set predates a given documents version (how the service hides a
delete on every searcher replica at once)."""

from __future__ import annotations

import pyarrow as pa

from kb_ray.search.gate import ActivePointers
from tests.index_fixtures import synthetic_docs, write_synthetic_catalog


def _tombstone(catalog, document_id: str) -> int:
    rows = [{**row, "active_version_id": None} for row in catalog.read("documents").to_pylist()
            if row["document_id"] == document_id]
    catalog.merge_upsert("documents", pa.Table.from_pylist(rows, schema=catalog.read("documents").schema),
                         keys=["document_id"])
    return catalog.delta_table("documents").version()


def test_at_least_drops_only_a_set_read_before_that_version(tmp_path):
    catalog = write_synthetic_catalog(tmp_path / "kb", synthetic_docs(4))
    gate = ActivePointers(catalog, max_age_s=600)
    token, active = gate.snapshot()
    gone = "ver_doc-001"
    assert gone in active.to_pylist()
    read_at = catalog.delta_table("documents").version()
    gate.at_least(read_at)  # nothing newer happened: the cached set stays
    assert gate.snapshot()[0] == token

    deleted_at = _tombstone(catalog, "doc_doc-001")
    assert gone in gate.snapshot()[1].to_pylist()  # cached for 600 s: the delete is not seen yet
    gate.at_least(deleted_at)
    token_after, active_after = gate.snapshot()
    assert token_after != token and gone not in active_after.to_pylist()
    gate.at_least(deleted_at)  # already read at that version: no re-read
    assert gate.snapshot()[0] == token_after


def test_a_pinned_gate_ignores_floors(tmp_path):
    catalog = write_synthetic_catalog(tmp_path / "kb", synthetic_docs(4))
    past = catalog.delta_table("documents").version()
    deleted_at = _tombstone(catalog, "doc_doc-001")
    gate = ActivePointers(catalog, version=past)
    token, active = gate.snapshot()
    gate.at_least(deleted_at)
    assert gate.snapshot() == (token, active) and "ver_doc-001" in active.to_pylist()
