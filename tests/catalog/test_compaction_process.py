"""The ingest's compaction in a child process, on a real catalog: the driver's open tables
see the child's commit, and the child is gone after close()."""

from __future__ import annotations

import os

from kb_ray.catalog.compaction_process import CompactionProcess
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.ingest.rows import to_table


def test_a_compaction_in_the_child_is_seen_by_the_driver_catalog(tmp_path):
    catalog = DeltaCatalog.open(str(tmp_path / "kb"))
    for i in range(5):
        catalog.append("ingest_log", to_table("ingest_log", [{"run_id": "r", "collection": "c", "uri": f"/f{i}"}]))
    assert len(catalog.delta_table("ingest_log").file_uris()) == 5
    process = CompactionProcess(catalog)
    with process:
        metrics = process.compact(["ingest_log"], target_size=1 << 20)
        child = next(iter(process._pool._processes))
    assert child != os.getpid()
    assert (metrics["ingest_log"]["numFilesRemoved"], metrics["ingest_log"]["numFilesAdded"]) == (5, 1)
    assert len(catalog.delta_table("ingest_log").file_uris()) == 1  # the driver's cached table caught up
    assert sorted(catalog.read("ingest_log").column("uri").to_pylist()) == [f"/f{i}" for i in range(5)]
    assert process._pool is None
