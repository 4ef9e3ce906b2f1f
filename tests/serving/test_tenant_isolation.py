"""Route-by-route tenant isolation over real HTTP to Ray Serve on 127.0.0.1 (docs/security.md).

Two tenants, ``alpha`` and ``beta``, each own one collection of documents whose texts carry
marker words no other document holds; both have a file named ``shared_name.md``, beta also a PDF
and an uploaded note. The routes are read from the service's own OpenAPI document, so a route
added later without a probe here fails :func:`test_every_route_has_a_probe`. Each probe sends one
tenant's key with the other tenant's document ids, chunk ids, titles, file names, URIs,
collection, answer id and ingest id, in every search and answer mode. No response may hold the
other tenant's markers, ids, titles, file names or URIs (beyond what the request itself sent), no
error may hold a server path, and a foreign reference must answer exactly as a made-up one of
the same shape does (no existence oracle). A seeded random walk sends 1,000 such requests.

The set-up (two ingests, one index with tree and graph, one upload ingested by the service) takes
about two minutes on the 2-core box, so the module is slow-marked: CI runs it in `make
test-cluster`. The Ray-free rules are tested by default in tests/auth/test_read_scope.py.
"""

from __future__ import annotations

import random
import re
import shutil
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from kb_ray.auth.keys import ApiKeyStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import AuthSettings
from kb_ray.index import build_index
from kb_ray.ingest.run import run_ingest
from kb_ray.serving.app import start_service, stop_service
from tests.conftest import GOLDEN_SOURCES
from tests.index_fixtures import golden_config

pytestmark = pytest.mark.slow
PORT = 8783
URL = f"http://127.0.0.1:{PORT}"
TENANTS = ("alpha", "beta")
MARKERS = {"alpha": ("quorvantine", "alphazircon", "velmorite"), "beta": ("brindlewax", "betaquartzite", "AF-SK-118")}
SEARCH_MODES = ("hybrid", "dense", "lexical", "tree", "graph", "page", "hybrid+page")
ANSWER_MODES = ("qa", "summary", "compare")
RANDOM_REQUESTS = 200  # each route is probed 12 times on its own above; the walk mixes them (#41: was 1000)


def _markdown(tenant: str, title: str) -> str:
    a, b, c = MARKERS[tenant]
    return (f"# {title}\n\nThis {tenant} report was issued by the {a} office on 3 March 2025.\n\n"
            f"## Scope\n\nThe {b} pump seal is inspected weekly; pressure stays below 6 bar.\n\n"
            f"## Owner\n\nThe {c} team owns the schedule and the warranty contract.\n")


def _write_sources(root: Path) -> dict[str, Path]:
    folders = {}
    for tenant in TENANTS:
        folder = root / "sources" / tenant
        folder.mkdir(parents=True)
        (folder / f"{tenant}_report.md").write_text(_markdown(tenant, f"{tenant.title()} Pump Report"))
        (folder / "shared_name.md").write_text(_markdown(tenant, "Maintenance Schedule"))
        (folder / f"{tenant}_notes.txt").write_text(f"{MARKERS[tenant][0]} notes: valve {MARKERS[tenant][1]}.\n")
        folders[tenant] = folder
    shutil.copy(GOLDEN_SOURCES / "manual.pdf", folders["beta"] / "beta_manual.pdf")  # holds AF-SK-118
    return folders


@dataclass
class Tenant:
    """What one tenant owns, as the other would try to name it."""

    name: str
    document_ids: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    version_ids: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    file_names: list[str] = field(default_factory=list)
    uris: list[str] = field(default_factory=list)
    answer_ids: list[str] = field(default_factory=list)
    ingest_ids: list[str] = field(default_factory=list)
    by_file: dict[str, str] = field(default_factory=dict)  # file name -> document id

    def references(self) -> list[str]:
        """Everything a document can be named by."""
        return self.document_ids + self.titles + self.file_names + self.uris

    def secrets(self) -> list[str]:
        """Strings that must never reach the other tenant unless it sent them itself."""
        return [*MARKERS[self.name], *self.document_ids, *self.chunk_ids, *self.version_ids, *self.uris,
                *self.titles, *self.file_names, *self.answer_ids, *self.ingest_ids]


def _auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _wait_for_ingest(key: str, ingest_id: str, timeout_s: float = 240) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = httpx.get(f"{URL}/v1/ingests/{ingest_id}", headers=_auth(key), timeout=60).json()
        if body["status"] in ("done", "failed"):
            return body
        time.sleep(1)
    raise AssertionError(f"ingest {ingest_id} did not finish in {timeout_s} s")


def _owned(kb_root: Path) -> dict[str, Tenant]:
    catalog = DeltaCatalog.open(str(kb_root), create=False)
    owned = {name: Tenant(name) for name in TENANTS}
    documents = catalog.read("documents", columns=["document_id", "collection", "uri", "title",
                                                   "active_version_id"]).to_pylist()
    tenant_of_version = {}
    for row in documents:
        tenant = owned[row["collection"]]
        tenant.document_ids.append(row["document_id"])
        tenant.uris.append(row["uri"])
        tenant.file_names.append(Path(row["uri"]).name)
        tenant.by_file[Path(row["uri"]).name] = row["document_id"]
        if row["title"] and row["title"] != "Maintenance Schedule":  # one title both own: not a secret
            tenant.titles.append(row["title"])
        tenant.version_ids.append(row["active_version_id"])
        tenant_of_version[row["active_version_id"]] = tenant
    for row in catalog.read("version_chunks", columns=["version_id", "chunk_id"]).to_pylist():
        tenant_of_version[row["version_id"]].chunk_ids.append(row["chunk_id"])
    for tenant in owned.values():  # one file name both tenants use is no secret of either
        tenant.file_names = [name for name in tenant.file_names if name != "shared_name.md"]
    return owned


@pytest.fixture(scope="module")
def service(ray_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("isolation")
    kb_root = root / "kb"
    settings = ("embedding.num_threads=1", "index.tree=true", "index.graph=true")  # graph: concepts at ingest
    for tenant, folder in _write_sources(root).items():
        report = run_ingest(golden_config(kb_root, f"ingest.sources=[{folder}]", f"ingest.collection={tenant}",
                                          "ingest.keep_raw=true", "ingest.inline_max_docs=10", *settings))
        assert report.status == "succeeded", report.to_dict()
    config = golden_config(kb_root, *settings, "search.evidence=lexical", "index.auto_refresh=true",
                           "index.refresh_interval_s=1")
    build_index(config)
    config.serve.auth = AuthSettings(enabled=True, tenants={name: [name] for name in TENANTS}, cache_ttl_s=0.2)
    store = ApiKeyStore(DeltaCatalog.open(str(kb_root), create=False))
    keys = {f"{tenant}-{role}": store.create(tenant=tenant, role=role)[0]
            for tenant in TENANTS for role in ("reader", "writer", "admin")}
    start_service(config, port=PORT)
    try:
        ingest_id = _upload_beta_note(keys["beta-writer"])
        owned = _owned(kb_root)
        owned["beta"].ingest_ids.append(ingest_id)
        for tenant in TENANTS:
            owned[tenant].answer_ids.append(_logged_answer(keys[f"{tenant}-reader"], tenant))
        yield {"keys": keys, "owned": owned, "root": str(root), "kb_root": kb_root}
    finally:
        stop_service()


def _upload_beta_note(key: str) -> str:
    note = f"# Beta uploaded memo\n\nThe {MARKERS['beta'][1]} valve memo: {MARKERS['beta'][0]} approved.\n"
    sent = httpx.post(f"{URL}/v1/documents", files=[("file", ("beta_memo.md", note.encode()))], headers=_auth(key),
                      timeout=60)
    assert sent.status_code == 202, sent.text
    ingest_id = sent.json()["ingest_id"]
    assert _wait_for_ingest(key, ingest_id)["status"] == "done"
    return ingest_id


def _logged_answer(key: str, tenant: str) -> str:
    answer = httpx.post(f"{URL}/v1/answer", json={"query": f"Who issued the {tenant} report?"},
                        headers=_auth(key), timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


# -- probes: one per route of the OpenAPI document -------------------------------------------


@dataclass(frozen=True)
class Probe:
    method: str
    path: str
    json: dict | None = None
    params: dict | None = None
    files: list | None = None
    role: str = "reader"
    sent: tuple[str, ...] = ()  # the foreign references this request carries (echo allowed)


def _pick(rng: random.Random, values: list[str]) -> str:
    return rng.choice(values)


def _search_probe(rng: random.Random, other: Tenant) -> Probe:
    ref = _pick(rng, other.document_ids + other.titles + other.file_names)
    choice = rng.randrange(4)
    search_filter = [None, {"collection": [other.name]}, {"document_ids": [_pick(rng, other.document_ids)]},
                     {"collection": [other.name], "document_ids": other.document_ids}][choice]
    body = {"query": rng.choice([ref, "pump seal inspection schedule", "warranty contract owner"]),
            "k": rng.randint(1, 20), "mode": rng.choice(SEARCH_MODES), "filter": search_filter,
            "context_chars": rng.choice([0, 400]), "evidence": rng.choice([None, "lexical", "hybrid"])}
    # the query is not swapped for the made-up twin (another query ranks otherwise): only filter ids
    return Probe("POST", "/v1/search", json=body, sent=tuple((search_filter or {}).get("document_ids") or ()))


def _answer_probe(rng: random.Random, other: Tenant) -> Probe:
    mode = rng.choice(ANSWER_MODES)
    documents = [_pick(rng, other.references()) for _ in range(1 if mode == "summary" else rng.randint(1, 2))]
    body: dict = {"query": rng.choice(["Who issued the report?", "summarize", "pump seal"]), "mode": mode}
    if mode == "qa" and rng.random() < 0.5:
        documents = [_pick(rng, other.document_ids)]
        body["filter"] = {"document_ids": documents, "collection": [other.name]}
    else:
        body["documents"] = documents
    if mode == "compare" and rng.random() < 0.5:
        body["dimensions"] = ["issuer", "owner"]
    return Probe("POST", "/v1/answer", json=body, sent=tuple(documents))


def _document_route(suffix: str):
    def probe(rng: random.Random, other: Tenant) -> Probe:
        ref = _pick(rng, other.document_ids + other.titles + other.file_names)
        return Probe("GET", f"/v1/documents/{ref}{suffix}", sent=(ref,))
    return probe


def _list_probe(rng: random.Random, other: Tenant) -> Probe:
    params = rng.choice([{"collection": other.name}, {"collection": f"{other.name},nope"}, {"mime": "text/markdown"},
                         {}, {"tags_any": "pumps"}])
    return Probe("GET", "/v1/documents", params={**params, "limit": rng.randint(1, 50)}, sent=(other.name,))


def _chunk_probe(rng: random.Random, other: Tenant) -> Probe:
    ref = _pick(rng, other.chunk_ids)
    return Probe("GET", f"/v1/chunks/{ref}", sent=(ref,))


def _feedback_probe(rng: random.Random, other: Tenant) -> Probe:
    ref = _pick(rng, other.answer_ids)
    return Probe("POST", f"/v1/answers/{ref}/feedback", json={"rating": rng.choice(["up", "down"])}, sent=(ref,))


def _ingest_probe(rng: random.Random, other: Tenant) -> Probe:
    ref = _pick(rng, other.ingest_ids or ["ing_0000"])
    return Probe("GET", f"/v1/ingests/{ref}", sent=(ref,))


def _delete_probe(rng: random.Random, other: Tenant) -> Probe:
    ref = _pick(rng, other.document_ids)
    return Probe("DELETE", f"/v1/documents/{ref}", role="writer", sent=(ref,))


def _upload_probe(rng: random.Random, other: Tenant) -> Probe:
    return Probe("POST", "/v1/documents", files=[("file", ("x.md", b"# x\n\ntext\n"))], role="writer",
                 params={"collection": other.name}, sent=(other.name,))


def _metrics_probe(rng: random.Random, other: Tenant) -> Probe:
    return Probe("GET", "/metrics", role=rng.choice(["admin", "reader"]))


def _healthz_probe(rng: random.Random, other: Tenant) -> Probe:
    return Probe("GET", "/healthz")


PROBES = {
    ("POST", "/v1/search"): _search_probe,
    ("POST", "/v1/answer"): _answer_probe,
    ("POST", "/v1/answers/{answer_id}/feedback"): _feedback_probe,
    ("GET", "/v1/documents"): _list_probe,
    ("POST", "/v1/documents"): _upload_probe,
    ("GET", "/v1/documents/{document_id}"): _document_route(""),
    ("DELETE", "/v1/documents/{document_id}"): _delete_probe,
    ("GET", "/v1/documents/{document_id}/versions"): _document_route("/versions"),
    ("GET", "/v1/documents/{document_id}/text"): _document_route("/text"),
    ("GET", "/v1/documents/{document_id}/tree"): _document_route("/tree"),
    ("GET", "/v1/documents/{document_id}/pages/{page_no}.png"): _document_route("/pages/1.png"),
    ("GET", "/v1/chunks/{chunk_id}"): _chunk_probe,
    ("GET", "/v1/ingests/{ingest_id}"): _ingest_probe,
    ("GET", "/metrics"): _metrics_probe,
    ("GET", "/healthz"): _healthz_probe,
}


def _openapi_routes() -> set[tuple[str, str]]:
    spec = httpx.get(f"{URL}/openapi.json", timeout=60).json()
    return {(method.upper(), path) for path, methods in spec["paths"].items() for method in methods}


def _send(probe: Probe, key: str) -> httpx.Response:
    if probe.files is not None:
        return httpx.post(f"{URL}{probe.path}", files=probe.files, data=probe.params, headers=_auth(key), timeout=120)
    return httpx.request(probe.method, f"{URL}{probe.path}", json=probe.json, params=probe.params,
                         headers=_auth(key), timeout=120)


def _leaks(response: httpx.Response, probe: Probe, other: Tenant, root: str) -> list[str]:
    """What of ``other``'s the response holds that the request did not send; a server path in an error."""
    body = response.text if response.headers.get("content-type", "").startswith(("application/json", "text")) \
        else ""
    sent = " ".join(probe.sent) + " " + str(probe.json) + " " + probe.path + " " + str(probe.params)
    found = [secret for secret in other.secrets() if secret and secret in body and secret not in sent]
    unechoed = body
    for echoed in probe.sent:  # a reference the caller sent may come back in the message
        unechoed = unechoed.replace(echoed, "")
    if response.status_code >= 400 and root in unechoed:
        found.append(f"server path {root}")
    return found


def _made_up(probe: Probe, other: Tenant) -> Probe:
    """The same request with each foreign reference replaced by a made-up one of the same shape."""
    mapping = {ref: _fake(ref) for ref in probe.sent if ref and ref != other.name}
    pattern = _alternation(mapping)

    def swap(value):
        if isinstance(value, str):  # one pass: a reference inside another (a file name in a URI) is not swapped twice
            return pattern.sub(lambda match: mapping[match.group(0)], value) if mapping else value
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    return Probe(probe.method, swap(probe.path), json=swap(probe.json), params=swap(probe.params), files=probe.files,
                 role=probe.role, sent=tuple(mapping.values()))


def _alternation(references) -> re.Pattern:
    """One regex matching any of ``references``, the longest first."""
    return re.compile("|".join(re.escape(ref) for ref in sorted(references, key=len, reverse=True)))


def _fake(reference: str) -> str:
    return re.sub(r"[0-9a-f]{8}", "0badc0de", reference) if reference[:4] in ("doc_", "ch_", "ing_") or \
        re.fullmatch(r"[0-9a-f]{32}", reference) else f"zz{reference}"


def _comparable(response: httpx.Response, probe: Probe) -> tuple:
    """Status and the part of the body that could tell a real reference from a made-up one."""
    try:
        body = response.json()
    except ValueError:
        return response.status_code, None
    if not isinstance(body, dict):
        return response.status_code, body
    if "detail" in body:
        detail = str(body["detail"])
        if probe.sent:
            detail = _alternation(probe.sent).sub("REF", detail)
        return response.status_code, re.sub(r"candidates: .*", "candidates: …", detail)
    return response.status_code, body.get("hits"), body.get("citations"), body.get("documents"), body.get("answer")


def _probe_once(service, probe: Probe, tenant: str) -> None:
    owned, root = service["owned"], service["root"]
    other = owned["beta" if tenant == "alpha" else "alpha"]
    key = service["keys"][f"{tenant}-{probe.role}"]
    response = _send(probe, key)
    assert response.status_code < 500, (probe, response.text[:500])
    assert not _leaks(response, probe, other, root), (tenant, probe, _leaks(response, probe, other, root),
                                                      response.text[:800])
    if probe.sent and probe.path not in ("/v1/documents", "/metrics"):
        twin = _made_up(probe, other)
        assert _comparable(response, probe) == _comparable(_send(twin, key), twin), (tenant, probe, twin)


def test_every_route_has_a_probe(service):
    missing = _openapi_routes() - set(PROBES)
    assert not missing, f"routes without an isolation probe (add one to PROBES): {sorted(missing)}"


@pytest.mark.parametrize("route", sorted(PROBES))
def test_each_route_with_the_other_tenants_references(service, route):
    """Every probe of the route, both directions, with several random foreign references."""
    rng = random.Random(zlib.crc32(" ".join(route).encode()))
    for tenant in TENANTS:
        for _ in range(6):
            other = service["owned"]["beta" if tenant == "alpha" else "alpha"]
            _probe_once(service, PROBES[route](rng, other), tenant)


def test_the_critical_cases_of_issue_37(service):
    """An alpha key asking beta's document by id and by file name in summary and compare, and
    feedback on beta's answer: 404, nothing of beta's in the body."""
    beta, keys, root = service["owned"]["beta"], service["keys"], service["root"]
    own = httpx.post(f"{URL}/v1/answer", json={"query": "summarize", "mode": "summary", "documents": ["shared_name.md"]},
                     headers=_auth(keys["alpha-reader"]), timeout=120)
    assert own.status_code == 200 and own.json()["documents"][0]["document_id"] == \
        service["owned"]["alpha"].by_file["shared_name.md"]
    assert any(m in own.text for m in MARKERS["alpha"]) and not any(m in own.text for m in MARKERS["beta"])
    for body in ({"query": "secret", "mode": "summary", "documents": [beta.by_file["beta_report.md"]]},
                 {"query": "secret", "mode": "summary", "documents": ["beta_report.md"]},
                 {"query": "secret", "mode": "compare", "documents": ["alpha_report.md", "beta_report.md"]},
                 {"query": "secret", "mode": "summary", "documents": ["beta_reprt.md"]}):
        response = httpx.post(f"{URL}/v1/answer", json=body, headers=_auth(keys["alpha-reader"]), timeout=120)
        assert response.status_code == 404, response.text
        assert not any(s in response.text for s in MARKERS["beta"]) and root not in response.text
        assert "upload://" not in response.text and not any(d in response.text for d in beta.document_ids
                                                            if d not in str(body))
    feedback = httpx.post(f"{URL}/v1/answers/{beta.answer_ids[0]}/feedback", json={"rating": "down"},
                          headers=_auth(keys["alpha-reader"]), timeout=60)
    assert feedback.status_code == 404
    catalog = DeltaCatalog.open(str(service["kb_root"]), create=False)
    assert beta.answer_ids[0] not in catalog.read("feedback", columns=["answer_id"]).column("answer_id").to_pylist()


def test_random_walk_over_every_route_and_mode(service):
    """A seeded random walk: RANDOM_REQUESTS requests, each a random route, tenant and foreign
    reference; then every one of each tenant's documents is still there (no cross-tenant delete)."""
    rng = random.Random(37)
    routes = sorted(PROBES)
    for _ in range(RANDOM_REQUESTS):
        tenant = rng.choice(TENANTS)
        other = service["owned"]["beta" if tenant == "alpha" else "alpha"]
        _probe_once(service, PROBES[rng.choice(routes)](rng, other), tenant)
    for tenant in TENANTS:
        for document_id in service["owned"][tenant].document_ids:
            seen = httpx.get(f"{URL}/v1/documents/{document_id}", headers=_auth(service["keys"][f"{tenant}-reader"]),
                             timeout=60)
            assert seen.status_code == 200, (tenant, document_id)
