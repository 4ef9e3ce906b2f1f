"""Listing streams into the DuckDB plan; unchanged rows come out as Arrow, ready to commit."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pytest

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.errors import SourceError
from kb_ray.ingest.commit import MicroBatchCommitter
from kb_ray.ingest.listing import list_sources
from kb_ray.ingest.planning import plan_ingest
from kb_ray.ingest.rows import to_table


def corpus(root, n: int):
    for i in range(n):
        folder = root / f"d{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"text {i}", encoding="utf-8")
    return root


def test_listing_is_a_lazy_stream_and_a_missing_source_fails_at_once(tmp_path):
    reader = list_sources([str(corpus(tmp_path / "src", 6))], collection="c", include=["**/*"])
    assert isinstance(reader, pa.RecordBatchReader)
    assert [batch.num_rows for batch in reader] == [2, 2, 2]  # one batch per directory
    with pytest.raises(SourceError, match="does not exist"):
        list_sources([str(tmp_path / "src"), str(tmp_path / "missing")], collection="c", include=["**/*"])


def test_unchanged_files_leave_the_plan_as_arrow_and_commit_their_sha_and_version(tmp_path):
    source = corpus(tmp_path / "src", 4)
    catalog = DeltaCatalog.open(str(tmp_path / "kb"))
    first = plan_ingest(list_sources([str(source)], collection="c", include=["**/*"]), catalog=catalog,
                        collection="c", pipeline_fp="fp", roots=[str(source)])
    assert first.todo.num_rows == 4 and first.unchanged.num_rows == 0
    now = datetime.now(timezone.utc)
    todo = first.todo.to_pylist()
    catalog.append("versions", to_table("versions", [{"version_id": f"v{i}", "document_id": row["document_id"],
                                                      "pipeline_fp": "fp"} for i, row in enumerate(todo)]))
    catalog.append("documents", to_table("documents", [{"document_id": row["document_id"], "active_version_id": f"v{i}",
                                                        "created_at": now} for i, row in enumerate(todo)]))
    catalog.append("sources", to_table("sources", [{**{k: row[k] for k in ("collection", "uri", "key", "size",
                                                                           "mtime", "document_id")},
                                                    "raw_sha": f"sha{i}", "status": "present"}
                                                   for i, row in enumerate(todo)]))
    again = plan_ingest(list_sources([str(source)], collection="c", include=["**/*"]), catalog=catalog,
                        collection="c", pipeline_fp="fp", roots=[str(source)])
    assert again.todo.num_rows == 0 and again.unchanged.num_rows == 4
    assert set(again.unchanged.column("action").to_pylist()) == {"unchanged"}
    committer = MicroBatchCommitter(catalog, run_id="run_b")
    committer.record_sources(again.unchanged, batch_no=0)
    committer.log(again.unchanged, batch_no=0)
    sources = catalog.read("sources").sort_by("uri")
    assert sources.num_rows == 4 and sources.column("raw_sha").null_count == 0
    assert set(sources.column("last_seen_run").to_pylist()) == {"run_b"}
    log = catalog.read("ingest_log")
    assert sorted(log.column("version_id").to_pylist()) == ["v0", "v1", "v2", "v3"]
