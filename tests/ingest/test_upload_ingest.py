"""The upload worker's step (kb_ray/ingest/uploads.py ``ingest_pending``) on a real ingest: files
of several pending uploads are ingested as one run, each upload's fields on its own files."""

from __future__ import annotations

import json

import pytest

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.ingest.uploads import UploadFields, UploadQueue, ingest_pending
from tests.index_fixtures import golden_config

# a Ray ingest, ~17 s; the upload queue is tested without Ray in tests/ingest/test_uploads.py;
# make test-cluster (CI) runs it
pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.slow]


def test_pending_uploads_are_micro_batched_into_one_run(tmp_path):
    config = golden_config(tmp_path / "kb", "embedding.num_threads=1")
    queue = UploadQueue(DeltaCatalog.open(config.kb_root))
    first, _ = queue.enqueue([("pumps.txt", b"The impeller of the pump is checked in spring.\n")],
                             collection="acme", tenant="acme", fields=UploadFields(tags=("pumps",)))
    second, _ = queue.enqueue([("valves.md", b"# Valves\n\nThe valve seat is lapped every year.\n"),
                               ("seals.txt", b"Seals are replaced after two thousand hours.\n")],
                              collection="beta", tenant="beta", fields=UploadFields(metadata={"owner": "ops"}))
    assert ingest_pending(config) == 3
    assert ingest_pending(config) == 0  # the queue is empty
    done = [queue.status(first), queue.status(second)]
    assert [status["status"] for status in done] == ["done", "done"], done
    assert done[0]["run_id"] == done[1]["run_id"] is not None  # one run for both uploads
    assert [f["action"] for status in done for f in status["files"]] == ["new", "new", "new"]
    rows = {row["uri"]: row for row in DeltaCatalog.open(config.kb_root, create=False).read("documents").to_pylist()}
    assert rows["upload://acme/pumps.txt"]["tags"] == ["pumps"] and rows["upload://acme/pumps.txt"]["active_version_id"]
    assert json.loads(rows["upload://beta/valves.md"]["metadata_json"]) == {"owner": "ops"}
    assert rows["upload://beta/seals.txt"]["collection"] == "beta"
