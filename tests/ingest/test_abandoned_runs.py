"""A run killed with SIGKILL never records its end: the next ingest, which takes over its
writer lease, marks it ``abandoned`` in ``ingest_runs`` (real driver process, inline
pipeline without Ray, real Delta)."""

from __future__ import annotations

from kb_ray.ingest.run import run_ingest
from tests.conftest import REPO_ROOT
from tests.ingest.faults import cli_ingest, kill_after_first_batch
from tests.ingest.helpers import catalog, ingest_config
from tests.ingest.test_faults import fault_corpus

INLINE = "ingest.inline_max_docs=100"  # the stages run in the driver: no Ray to start or clean up


def run_statuses(kb) -> dict[str, str]:
    return {row["run_id"]: row["status"] for row in catalog(kb).read("ingest_runs").to_pylist()}


def test_a_run_killed_with_sigkill_is_marked_abandoned_by_the_run_that_takes_over_its_lease(tmp_path):
    corpus, kb = fault_corpus(tmp_path / "src"), tmp_path / "kb"
    driver = cli_ingest(kb_root=kb, sources=[corpus], config=REPO_ROOT / "conf" / "local.yaml", extra=(INLINE,))
    kill_after_first_batch(driver)
    (killed, status), = run_statuses(kb).items()
    assert status == "running" and catalog(kb).read("leases").num_rows == 1  # what the kill left behind

    report = run_ingest(ingest_config(kb, [corpus], INLINE))
    assert report.documents["unchanged"] > 0  # it took over the dead holder's lease and resumed
    assert run_statuses(kb) == {killed: "abandoned", report.run_id: "succeeded"}
    assert catalog(kb).read("leases").num_rows == 0
