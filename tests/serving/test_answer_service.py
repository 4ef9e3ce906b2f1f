"""POST /v1/answer over real HTTP on 127.0.0.1 (extractive, golden catalog)."""

from __future__ import annotations

import time

import httpx
import pytest

from kb_ray.index import build_index
from kb_ray.serving.app import start_service, stop_service
from tests.index_fixtures import copy_kb, golden_config

PORT = 8767
URL = f"http://127.0.0.1:{PORT}"


@pytest.fixture(scope="module")
def service(ray_session, golden_kb, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-answer")
    config = golden_config(copy_kb(golden_kb, root / "kb"), "embedding.num_threads=1", "index.shards=1")
    build_index(config)
    start_service(config, port=PORT)
    yield config
    stop_service()


def ask(**body) -> httpx.Response:
    return httpx.post(f"{URL}/v1/answer", json=body, timeout=120)


def test_an_answerable_question_gets_a_verified_cited_answer(service):
    response = ask(query="how many eelgrass shoots were transplanted in Halvik Bay")
    assert response.status_code == 200
    body = response.json()
    assert not body["abstained"] and body["verification"] == "ok" and "38,400" in body["answer"]
    cited = [c for c in body["citations"] if "38,400" in c["quote"]]
    assert cited and cited[0]["uri"].endswith("two_column.pdf") and 1 in cited[0]["pages"]
    assert all(s["supported"] for s in body["sentences"]) and body["generator"]["backend"] == "extractive"
    assert {"search", "pack", "generate", "verify", "total"} <= set(body["timings_ms"])


def test_a_question_the_corpus_does_not_answer_gets_the_refusal(service):
    body = ask(query="Who won the 1998 football world cup?").json()
    assert body["abstained"] and body["citations"] == [] and body["verification"] == "refused"
    assert body["answer"] == service.answer.refusal


def test_bad_requests_are_400_and_the_endpoint_is_documented(service):
    assert ask(query="   ").status_code == 400
    assert ask(query="seal kit", mode="poem").status_code == 400
    assert ask(query="seal kit", temperature=2).status_code == 422  # unknown field
    schema = httpx.get(f"{URL}/openapi.json", timeout=30).json()
    assert "/v1/answer" in schema["paths"] and "AnswerRequest" in schema["components"]["schemas"]


def test_summary_and_compare_over_http_cite_only_the_named_documents(service):
    summary = ask(query="summarize", mode="summary", documents=["manual.pdf"]).json()
    assert summary["mode"] == "summary" and summary["sections"]
    assert summary["citations"] and all(c["uri"].endswith("manual.pdf") for c in summary["citations"])
    cited = {n for s in summary["sections"] for n in s["citations"]}
    assert cited <= {c["n"] for c in summary["citations"]}
    compare = ask(query="compare", mode="compare", documents=["manual.pdf", "policy.docx"],
                  dimensions=["maximum discharge pressure"]).json()
    assert compare["mode"] == "compare" and len(compare["cells"]) == 2
    assert {c["dimension"] for c in compare["cells"]} == {"maximum discharge pressure"}
    assert "| maximum discharge pressure |" in compare["answer"]
    names = {c["n"]: c["uri"] for c in compare["citations"]}
    for cell in compare["cells"]:
        assert cell["citations"] or cell["text"] == "not stated"
        assert all(names[n].rsplit("/", 1)[-1] in ("manual.pdf", "policy.docx") for n in cell["citations"])


def test_qa_within_named_documents_and_an_unknown_document_is_404(service):
    body = ask(query="how many eelgrass shoots were transplanted in Halvik Bay", documents=["two_column.pdf"]).json()
    assert "38,400" in body["answer"] and all(c["uri"].endswith("two_column.pdf") for c in body["citations"])
    missing = ask(query="eelgrass shoots", documents=["no-such-report.pdf"])
    assert missing.status_code == 404 and "no-such-report.pdf" in missing.text


def test_oversized_bodies_are_413_and_overlong_queries_400_before_any_work(service):
    huge = "pump " * 300_000  # 1.5 MB
    for path in ("/v1/search", "/v1/answer"):
        response = httpx.post(f"{URL}{path}", json={"query": huge}, timeout=60)
        assert response.status_code == 413, (path, response.text)
    long_query = "seal kit " * 1000  # 9,000 characters, under the body limit
    for path in ("/v1/search", "/v1/answer"):
        started = time.perf_counter()
        response = httpx.post(f"{URL}{path}", json={"query": long_query}, timeout=60)
        assert response.status_code == 400 and "max_query_chars" in response.text, (path, response.text)
        assert time.perf_counter() - started < 5  # refused before it is embedded
    assert httpx.post(f"{URL}/v1/search", content=b"{not json", timeout=30,
                      headers={"content-type": "application/json"}).status_code == 422
