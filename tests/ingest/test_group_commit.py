"""Group commit: the read-ahead that gathers waiting micro-batches, and one commit of several."""

from __future__ import annotations

import threading
import time

import pytest

from kb_ray.ingest.commit import MicroBatchCommitter, combine_batches
from kb_ray.ingest.group_commit import ReadAhead
from tests.ingest.test_commit_scale import batch_of, open_catalog


def test_rows_already_waiting_are_taken_together_up_to_the_limit():
    rows = iter([{"n": i} for i in range(7)])
    reader = ReadAhead(rows, max_group=3)
    time.sleep(0.3)  # the thread has queued what the bounded queue holds
    groups = []
    while group := reader.next_group():
        groups.append([row["n"] for row in group])
    assert groups[0] == [0, 1, 2] and sum(groups, []) == list(range(7))
    assert all(len(g) <= 3 for g in groups)


def test_a_slow_pipeline_is_committed_one_row_at_a_time():
    release = threading.Event()

    def slow():
        yield {"n": 0}
        release.wait(5)
        yield {"n": 1}

    reader = ReadAhead(slow(), max_group=8)
    assert reader.next_group() == [{"n": 0}]  # nothing else was waiting: no wait for a full group
    release.set()
    assert reader.next_group() == [{"n": 1}] and reader.next_group() == []


def test_a_pipeline_error_reaches_the_committing_thread():
    def failing():
        yield {"n": 0}
        raise RuntimeError("worker died")

    reader = ReadAhead(failing(), max_group=4)
    with pytest.raises(RuntimeError, match="worker died"):
        while reader.next_group():
            pass


def test_one_commit_of_combined_batches_writes_what_separate_commits_write(tmp_path):
    separate, grouped = open_catalog(tmp_path / "a"), open_catalog(tmp_path / "b")
    committer = MicroBatchCommitter(separate, run_id="run_a")
    for batch_no in range(3):
        committer.commit(batch_of(separate, batch_no), batch_no=batch_no)
    outcome = MicroBatchCommitter(grouped, run_id="run_a").commit(
        combine_batches([batch_of(grouped, batch_no) for batch_no in range(3)]), batch_no=0)
    assert outcome.summary.num_rows == 6
    for table in ("documents", "sources", "embeddings", "versions", "elements"):
        key = {"documents": "document_id", "sources": "uri", "embeddings": "embed_text_sha"}.get(table, "version_id")
        assert sorted(separate.read(table).column(key).to_pylist()) == sorted(grouped.read(table).column(key).to_pylist())
    assert grouped.delta_table("documents").version() < separate.delta_table("documents").version()


def test_first_of_each_keeps_the_first_occurrence_in_order():
    import pyarrow as pa

    from kb_ray.ingest.rows import first_of_each

    values = pa.chunked_array([["a", "b"], ["a", "c", "b"]])
    assert first_of_each(values).to_pylist() == [True, True, False, True, False]


def test_commit_groups_are_single_rows_without_read_ahead_and_gathered_with_it():
    from kb_ray.ingest.group_commit import commit_groups

    assert list(commit_groups(iter([{"n": 0}, {"n": 1}]), max_group=1)) == [[{"n": 0}], [{"n": 1}]]
    rows = [{"n": i} for i in range(5)]
    assert sum(commit_groups(iter(rows), max_group=4), []) == rows
