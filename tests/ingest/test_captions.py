"""Figure captions end to end: real Ray ingest, a real OpenAI-compatible HTTP server on
127.0.0.1 (tests/enrich/openai_server.py), real Delta tables, a real index and search."""

from __future__ import annotations

import json
import shutil

import pytest

from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.purge import purge
from kb_ray.catalog.verify import verify_catalog
from kb_ray.errors import KbRayError
from kb_ray.index.build import build_index
from kb_ray.ingest.run import run_ingest
from kb_ray.search.searcher import HybridSearcher
from tests.conftest import GOLDEN_SOURCES
from tests.enrich.openai_server import CAPTION_WORDS, serve_openai
from tests.ingest.helpers import INLINE, catalog, ingest_config, log_rows

pytestmark = pytest.mark.usefixtures("ray_session")
MODEL = "kb-ray/test-vlm"


def caption_config(kb, sources, endpoint, *extra):
    return ingest_config(kb, sources, "enrich.captions.enabled=true", "enrich.captions.backend=openai",
                         f"enrich.captions.endpoint={endpoint}", f"enrich.captions.model_id={MODEL}",
                         "enrich.captions.price_per_1k_prompt_tokens=0.5",
                         "enrich.captions.price_per_1k_completion_tokens=1.5", "enrich.captions.timeout_s=10",
                         "enrich.captions.retries=0", "index.shards=1", *extra)


@pytest.fixture()
def figure_sources(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("figure.pdf", "manual.pdf", "guide.md"):
        shutil.copy(GOLDEN_SOURCES / name, src / name)
    return src


def rows_of_kind(kb, table: str, kind: str) -> list[dict]:
    """Filtered in Python: a string filter pushed into a Delta dataset with string_view
    columns can silently match nothing (see kb_ray.catalog.sql)."""
    return [row for row in catalog(kb).read(table).to_pylist() if row["kind"] == kind]


def figure_element(kb):
    elements = rows_of_kind(kb, "elements", "figure")
    assert len(elements) == 1, "golden figure.pdf has exactly one figure"
    return elements[0], json.loads(elements[0]["attrs_json"])


# a Ray ingest with a tiny VLM, ~33 s; the captioners are tested without Ray in
# tests/enrich/test_captioners.py; make test-cluster (CI) runs it
@pytest.mark.slow
def test_captions_are_stored_once_and_searchable_at_their_figure(tmp_path, figure_sources):
    kb = tmp_path / "kb"
    with serve_openai(model=MODEL) as server:
        config = caption_config(kb, [figure_sources], server.base_url)
        report = run_ingest(config)
        assert len(server.requests) == 1  # one figure in the corpus, one call
    assert report.captions == {"computed": 1, "cached": 0, "failed": 0, "skipped": 0}
    assert report.documents["failed"] == 0

    element, attrs = figure_element(kb)
    crop = BlobStore(str(kb), kind="figures").get(attrs["crop_sha"])
    (enrichment,) = catalog(kb).read("enrichments").to_pylist()
    assert enrichment["input_sha"] == attrs["crop_sha"] and enrichment["status"] == "ok"
    assert enrichment["model"] == MODEL and enrichment["kind"] == "caption" and enrichment["error"] is None
    assert CAPTION_WORDS in enrichment["text"] and enrichment["prompt_tokens"] > 0 < enrichment["completion_tokens"]
    expected_cost = (enrichment["prompt_tokens"] * 0.5 + enrichment["completion_tokens"] * 1.5) / 1000
    assert enrichment["cost_usd"] == pytest.approx(expected_cost)
    assert crop[:8] == b"\x89PNG\r\n\x1a\n"

    (description,) = rows_of_kind(kb, "chunks", "figure_description")
    assert description["text"] == enrichment["text"] and attrs["description_chunk_id"] == description["chunk_id"]
    assert element["text"] == "[figure]"  # the caption never replaces the document's text
    assert verify_catalog(catalog(kb)).ok(strict=True)

    build_index(config)
    top = HybridSearcher.open(config).search("chart with axes, labels and a legend", k=3, mode="hybrid").hits[0]
    assert top["chunk_kind"] == "figure_description" and top["generated"] and top["quote"] is None
    assert top["text"] == enrichment["text"] and top["uri"].endswith("figure.pdf")
    region = element["regions"][0]
    assert top["regions"][0]["page"] == region["page"]
    assert top["regions"][0]["bbox"] == [round(region[c], 4) for c in ("x0", "y0", "x1", "y1")]

    with serve_openai(model=MODEL) as server:  # unchanged files: nothing parsed, nothing captioned
        again = run_ingest(caption_config(kb, [figure_sources], server.base_url))
        assert again.documents["unchanged"] == 3 and not server.requests

    (figure_sources / "figure.pdf").unlink()  # the figure's document goes: purge takes its caption and crop
    with serve_openai(model=MODEL) as server:
        assert run_ingest(caption_config(kb, [figure_sources], server.base_url, "ingest.sync=full")).documents["deleted"] == 1
    purged = purge(catalog(kb))
    assert purged.deleted_rows["enrichments"] == 1 and purged.deleted_rows["figure_blobs"] == 1
    assert catalog(kb).read("enrichments").num_rows == 0 and not BlobStore(str(kb), kind="figures").list_shas()
    assert verify_catalog(catalog(kb)).ok(strict=True)


@pytest.mark.slow  # a Ray ingest with a tiny VLM, ~35 s; CI runs it (make test-cluster)
def test_a_failed_caption_is_recorded_and_the_document_still_commits(tmp_path, figure_sources):
    kb = tmp_path / "kb"
    with serve_openai(model=MODEL, always_fail=True) as server:
        report = run_ingest(caption_config(kb, [figure_sources], server.base_url))
    assert report.captions["failed"] == 1 and report.captions["computed"] == 0
    assert report.documents["failed"] == 0 and report.documents["new"] == 3
    (enrichment,) = catalog(kb).read("enrichments").to_pylist()
    assert enrichment["status"] == "failed" and enrichment["text"] is None and "500" in enrichment["error"]
    assert not rows_of_kind(kb, "chunks", "figure_description")
    figure_log = [row for row in log_rows(kb, report.run_id) if row["uri"].endswith("figure.pdf")]
    assert figure_log[0]["status"] == "ok" and "figure caption(s) failed" in figure_log[0]["error"]
    assert verify_catalog(catalog(kb)).ok(strict=True)

    shutil.copy(figure_sources / "figure.pdf", figure_sources / "figure_copy.pdf")  # same crop, new document
    with serve_openai(model=MODEL) as server:
        retry = run_ingest(caption_config(kb, [figure_sources], server.base_url))
    assert retry.captions["computed"] == 1 and retry.documents["new"] == 1
    (enrichment,) = catalog(kb).read("enrichments").to_pylist()  # the success replaced the failure
    assert enrichment["status"] == "ok" and enrichment["run_id"] == retry.run_id


@pytest.mark.slow  # two Ray ingests, ~30 s; CI runs it (make test-cluster)
def test_captions_change_the_pipeline_fingerprint(tmp_path, figure_sources):
    kb = tmp_path / "kb"
    plain = run_ingest(ingest_config(kb, [figure_sources], INLINE))
    with serve_openai(model=MODEL) as server:
        captioned = run_ingest(caption_config(kb, [figure_sources], server.base_url))
    assert plain.documents["new"] == 3 and captioned.documents["changed"] == 3
    assert captioned.chunks["new"] == 1 and captioned.embeddings["computed"] == 1  # only the description is new


@pytest.mark.parametrize(("overrides", "message"), [
    (["enrich.captions.backend=transformers", "enrich.captions.model_path=/nonexistent/vlm"], "caption model not found"),
    (["enrich.captions.backend=openai"], "needs captions.endpoint"),
    (["enrich.captions.backend=openai", "enrich.captions.endpoint=http://127.0.0.1:9/v1",
      "enrich.captions.api_key_env=KB_RAY_TEST_UNSET_KEY"], "KB_RAY_TEST_UNSET_KEY"),
])
def test_caption_settings_that_would_stop_every_actor_fail_before_the_run(tmp_path, figure_sources, overrides, message):
    config = ingest_config(tmp_path / "kb", [figure_sources], "enrich.captions.enabled=true", *overrides)
    with pytest.raises(KbRayError, match=message):
        run_ingest(config)
    assert catalog(tmp_path / "kb").read("ingest_runs").num_rows == 0
