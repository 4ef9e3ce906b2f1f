"""Slow and greedy clients at the HTTP edge of the real service (issue #37, point 4): stalled request
bodies from many addresses while a client searches, one address over its in-flight limit, and a
client that leaves mid-body (loopback HTTP through Ray Serve's proxy, golden catalog).

A stalled client (``loadtest.open_stalled``) is a raw socket that sends its headers with a
``Content-Length`` larger than the bytes it sends, then nothing. Each comes from its own loopback address (127.0.1.N), so the
per-client limit does not refuse them: only the body deadline and the ingress's
``max_ongoing_requests`` keep search going.
"""

from __future__ import annotations

import logging
import socket
import statistics
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kb_ray.index import build_index
from kb_ray.serving import loadtest
from kb_ray.serving.app import start_service, stop_service
from tests.conftest import REPO_ROOT
from tests.index_fixtures import copy_kb, golden_config

# its own Serve application (like tests/serving/test_service_load.py): make test-cluster (CI) runs it
pytestmark = pytest.mark.slow

PORT = 8781
URL = f"http://127.0.0.1:{PORT}"
BODY_TIMEOUT_S = 5.0  # serve.body_read_timeout_s and body_idle_timeout_s here (default 10 s)
PER_CLIENT = 4  # serve.max_requests_per_client here (default 16)
STALLED = 50
SEARCHES = 15
logger = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def service(golden_kb, tmp_path_factory):
    kb_root = copy_kb(golden_kb, tmp_path_factory.mktemp("slow-clients") / "kb")
    config = golden_config(kb_root, "embedding.num_threads=1", f"serve.body_read_timeout_s={BODY_TIMEOUT_S}",
                           f"serve.body_idle_timeout_s={BODY_TIMEOUT_S}", "serve.upload_read_timeout_s=60",
                           f"serve.max_requests_per_client={PER_CLIENT}")
    build_index(config)
    start_service(config, port=PORT)
    for _ in range(3):  # the embedder's and searcher's first requests are slow
        assert httpx.post(f"{URL}/v1/search", json={"query": "pump seal"}, timeout=120).is_success
    yield config
    stop_service()


@pytest.fixture(scope="module")
def bodies():
    queries = loadtest.golden_queries(REPO_ROOT / "golden" / "queries.jsonl")
    return [{"query": query, "k": 5} for query in queries[:SEARCHES]]


def stall(path: str, *, source: str) -> socket.socket:
    return loadtest.open_stalled("127.0.0.1", PORT, path, source=source)


def timed_searches(http: httpx.Client, bodies: list[dict]) -> list[float]:
    seconds = []
    for body in bodies:
        started = time.perf_counter()
        response = http.post("/v1/search", json=body)
        seconds.append(time.perf_counter() - started)
        assert response.status_code == 200, (body, response.status_code, response.text[:300])
    return seconds


def test_fifty_stalled_bodies_leave_search_latency_alone_and_get_408_at_the_deadline(service, bodies):
    """Before: five stalled bodies held all five ingress slots and every search timed out."""
    with httpx.Client(base_url=URL, timeout=30) as http:
        unloaded = statistics.median(timed_searches(http, bodies))
        opened = time.monotonic()
        stalled = [stall("/v1/search" if n % 2 else "/v1/documents", source=f"127.0.1.{n + 1}")
                   for n in range(STALLED)]
        time.sleep(0.5)  # each one is in the ingress now, waiting for the rest of its body
        loaded = statistics.median(timed_searches(http, bodies))
        searched_s = time.monotonic() - opened
    answers = loadtest.stalled_replies(stalled, since=opened, timeout_s=BODY_TIMEOUT_S + 30)
    answered_s = [a.first_bytes_s if a.first_bytes_s is not None else float("inf") for a in answers]
    logger.warning("search p50 %.0f ms alone, %.0f ms beside %d stalled bodies; 408s after %.1f-%.1f s",
                   unloaded * 1000, loaded * 1000, STALLED, min(answered_s), max(answered_s))
    assert loaded <= 2 * unloaded, (loaded, unloaded)
    assert searched_s < min(answered_s), "the searches ran while all were stalled"
    for answer, seconds in zip(answers, answered_s):
        assert answer.status_line == "HTTP/1.1 408 Request Timeout" and answer.closed, answer
        assert BODY_TIMEOUT_S - 0.5 <= seconds <= BODY_TIMEOUT_S + 20, answer


def test_one_address_past_its_in_flight_limit_gets_429_and_others_are_served(service):
    opened = time.monotonic()
    greedy = [stall("/v1/search", source="127.0.2.1") for _ in range(PER_CLIENT + 2)]
    time.sleep(0.5)
    with httpx.Client(base_url=URL, timeout=30, transport=httpx.HTTPTransport(local_address="127.0.2.1")) as own:
        refused = own.post("/v1/search", json={"query": "pump seal", "k": 3})
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert f"{PER_CLIENT} requests in flight" in refused.json()["detail"]
    assert httpx.post(f"{URL}/v1/search", json={"query": "pump seal", "k": 3}, timeout=30).status_code == 200
    answers = loadtest.stalled_replies(greedy, since=opened, timeout_s=BODY_TIMEOUT_S + 30)
    statuses = sorted(answer.status_line.split(" ")[1] for answer in answers)
    assert statuses == ["408"] * PER_CLIENT + ["429"] * 2 and all(answer.closed for answer in answers), answers
    assert all(a.first_bytes_s < BODY_TIMEOUT_S - 1 for a in answers if " 429 " in a.status_line), answers
    with httpx.Client(base_url=URL, timeout=30, transport=httpx.HTTPTransport(local_address="127.0.2.1")) as own:
        assert own.post("/v1/search", json={"query": "pump seal", "k": 3}).status_code == 200  # released


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_client_that_leaves_mid_body_is_499_in_metrics_not_an_error(service):
    """Ray Serve's proxy logs 499 for it and cancels the request; /metrics counted a 500 (issue #37, point 8)."""
    key = ("kb_ray_http_requests_total", (("method", "POST"), ("route", "/v1/search"), ("status", "499")))
    before = _samples(httpx.get(f"{URL}/metrics", timeout=30).text).get(key, 0)
    sock = stall("/v1/search", source="127.0.3.1")
    time.sleep(0.5)
    sock.close()
    samples: dict = {}
    for _ in range(40):
        samples = _samples(httpx.get(f"{URL}/metrics", timeout=30).text)
        if samples.get(key, 0) > before:
            break
        time.sleep(0.25)
    assert samples.get(key, 0) == before + 1, samples
    assert ("kb_ray_http_errors_total", (("route", "/v1/search"),)) not in samples  # nor did any 408 or 429 count
