"""The answer log and feedback: real Delta tables, the Serve app over real HTTP on a golden
catalog, the ready queries through ``kb-ray sql`` and drafts through ``kb-ray eval export-drafts``."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from kb_ray.answer.log import AnswerLog
from kb_ray.catalog.sql import load_ready_query, run_query
from kb_ray.cli import main as kb_ray
from kb_ray.index import build_index
from kb_ray.serving.app import start_service, stop_service
from tests.index_fixtures import SyntheticDoc, copy_kb, golden_config, write_synthetic_catalog

PORT = 8766
URL = f"http://127.0.0.1:{PORT}"
QUESTION = "Which part number do I order for a replacement mechanical seal on the AquaFlow pump?"


def a_response(*, supported: list[bool]) -> dict:
    sentences = [{"text": f"s{i} [1].", "citations": [1], "supported": ok, "support": 0.9 if ok else 0.1,
                  "problem": None if ok else "unsupported"} for i, ok in enumerate(supported)]
    return {"id": uuid.uuid4().hex, "mode": "qa", "answer": " ".join(s["text"] for s in sentences),
            "abstained": False, "sentences": sentences, "verification": "ok" if all(supported) else "flagged",
            "citations": [{"n": 1, "chunk_id": "ch_a_0", "document_id": "doc_a", "version_id": "ver_a",
                           "title": "Title a", "uri": "mem://a", "quote": "q", "spans": [[0, 1]], "pages": [1],
                           "regions": []}],
            "generator": {"backend": "extractive", "model": None, "fingerprint": "fp_test"},
            "timings_ms": {"total": 20.0}, "usage": {"prompt_tokens": 3, "completion_tokens": 4, "cost_usd": 0.0},
            "repaired": False}


def test_a_batched_log_commits_waiting_answers_in_one_append_and_knows_them_before(tmp_path):
    catalog = write_synthetic_catalog(tmp_path / "kb", [SyntheticDoc(key="a")])
    log = AnswerLog(catalog, max_pending=3, max_delay_s=60)
    before = catalog.delta_table("answers").version()
    first, second = a_response(supported=[True, False]), a_response(supported=[True])
    log.append({"query": "one", "mode": "qa"}, first)
    log.append({"query": "two", "mode": "qa"}, second)
    assert catalog.delta_table("answers").version() == before and log.knows(first["id"])
    assert log.flush() == 2 and catalog.delta_table("answers").version() == before + 1
    rows = run_query(catalog, load_ready_query("unsupported_sentence_rate")).to_pylist()
    assert [(r["generator_fp"], r["answers"], r["sentences"], r["unsupported"]) for r in rows] == [("fp_test", 2, 3, 1)]
    assert rows[0]["unsupported_share"] == 0.3333 and rows[0]["abstained_share"] == 0.0
    assert not log.knows("no-such-answer")


@pytest.fixture(scope="module")
def service(ray_session, golden_kb, tmp_path_factory):
    kb_root = copy_kb(golden_kb, tmp_path_factory.mktemp("answer_log") / "kb")
    config = golden_config(kb_root, "embedding.num_threads=1", "answer.log_flush_s=0.2")
    build_index(config)
    start_service(config, port=PORT)
    yield config
    stop_service()


def sql_rows(kb_root: str, name: str, capsys) -> list[dict]:
    capsys.readouterr()
    assert kb_ray(["sql", "--query", name, "--json", "--set", f"kb_root={kb_root}"]) == 0
    return json.loads(capsys.readouterr().out)


# its own Serve application, ~37 s; the batched log is tested without Serve above; make test-cluster (CI) runs it
@pytest.mark.slow
def test_answers_are_logged_feedback_lands_and_down_votes_become_drafts(service, capsys, tmp_path):
    answer = httpx.post(f"{URL}/v1/answer", json={"query": QUESTION}, timeout=120).json()
    assert answer["citations"] and not answer["abstained"]
    verdict = httpx.post(f"{URL}/v1/answers/{answer['id']}/feedback", json={"rating": "down", "comment": "too long"},
                         timeout=30)
    assert verdict.status_code == 200 and verdict.json()["answer_id"] == answer["id"]
    unknown = httpx.post(f"{URL}/v1/answers/{uuid.uuid4().hex}/feedback", json={"rating": "up"}, timeout=30)
    assert unknown.status_code == 404 and "no logged answer" in unknown.json()["detail"]
    bad = httpx.post(f"{URL}/v1/answers/{answer['id']}/feedback", json={"rating": "meh"}, timeout=30)
    assert bad.status_code == 422

    deadline = time.monotonic() + 20
    while not (rates := sql_rows(service.kb_root, "unsupported_sentence_rate", capsys)) and time.monotonic() < deadline:
        time.sleep(0.3)  # the ingress commits its waiting answers every answer.log_flush_s
    assert [(r["generator_backend"], r["answers"], r["sentences"]) for r in rates] == [
        ("extractive", 1, len(answer["sentences"]))]
    feedback = sql_rows(service.kb_root, "answer_feedback", capsys)
    assert [(f["answer_id"], f["rating"], f["comment"]) for f in feedback] == [(answer["id"], "down", "too long")]
    assert feedback[0]["cited_chunk_ids"] == [c["chunk_id"] for c in answer["citations"]]

    out = tmp_path / "drafts.jsonl"
    assert kb_ray(["eval", "export-drafts", "--out", str(out), "--set", f"kb_root={service.kb_root}"]) == 0
    [draft] = [json.loads(line) for line in out.read_text().splitlines()]
    assert draft["query"] == QUESTION and draft["needs_label"] is True
    assert (draft["relevant"], draft["kind"], draft["answer"]) == (None, None, None)
    assert draft["draft"]["answer_id"] == answer["id"] and draft["draft"]["verdicts"][0]["rating"] == "down"
    assert [c["quote"] for c in draft["draft"]["cited"]] == [c["quote"] for c in answer["citations"]]
