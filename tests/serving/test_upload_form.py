"""Ray-free checks of the upload route's pieces (kb_ray/serving/uploads.py): the multipart form
read through a real FastAPI app, the per-route body limit, the type check, the collection rule."""

from __future__ import annotations

import pytest
from fastapi import FastAPI, HTTPException, Request
from fastapi.testclient import TestClient

from kb_ray.auth.keys import Caller
from kb_ray.errors import UploadError
from kb_ray.parsing.router import DEFAULT_ROUTES
from kb_ray.serving.edge_limits import BodyGuard, BodyRules, EdgePolicy
from kb_ray.serving.uploads import check_supported, upload_collection, upload_form

PDF = b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\n"


@pytest.fixture(scope="module")
def client():
    app = FastAPI()
    policy = EdgePolicy(BodyRules(max_bytes=100))
    policy.allow_route("POST", "/form", BodyRules(max_bytes=2000))
    app.add_middleware(BodyGuard, policy=policy)

    @app.post("/form")
    async def form(request: Request) -> dict:
        try:
            async with upload_form(request) as (files, fields):
                return {"files": [[name, len(await part.read())] for name, part in files], "tags": list(fields.tags),
                        "collection": fields.collection, "metadata": fields.metadata}
        except UploadError as exc:
            raise HTTPException(exc.status, str(exc)) from exc

    @app.post("/other")
    async def other(request: Request) -> dict:
        return {"bytes": len(await request.body())}

    return TestClient(app)


def test_the_form_gives_sanitized_names_and_parsed_fields(client):
    response = client.post("/form", files=[("file", ("docs/a.md", b"# A\n")), ("file", ("b.txt", b"bee"))],
                           data={"tags": "x, y", "collection": "manuals", "metadata": '{"k": 1}'})
    assert response.status_code == 200, response.text
    assert response.json() == {"files": [["a.md", 4], ["b.txt", 3]], "tags": ["x", "y"], "collection": "manuals",
                               "metadata": {"k": 1}}


@pytest.mark.parametrize(("kwargs", "status", "words"), [
    ({"data": {"tags": "x"}}, 400, "one or more `file` parts"),
    ({"json": {"file": "a.txt"}}, 400, "one or more `file` parts"),
    ({"files": [("file", ("dir/", b"x"))]}, 400, "no usable name"),
    ({"files": [("file", ("../../a.md", b"x"))]}, 400, "climbs"),
    ({"files": [("file", ("a.txt", b"x")), ("metadata", ("m.json", b"{}"))]}, 400, "must be text"),
    ({"files": [("file", ("a.txt", b"x"))], "data": {"metadata": "[]"}}, 400, "JSON object"),
])
def test_a_bad_form_is_400_with_a_clear_message(client, kwargs, status, words):
    response = client.post("/form", **kwargs)
    assert response.status_code == status and words in response.json()["detail"]


def test_the_upload_route_has_its_own_body_limit_and_the_others_keep_theirs(client):
    assert client.post("/form", files=[("file", ("a.txt", b"x" * 1000))]).status_code == 200
    over = client.post("/form", files=[("file", ("a.txt", b"x" * 2100))])
    assert over.status_code == 413 and "2000-byte limit" in over.json()["detail"]
    streamed = client.post("/form", content=iter([b"x" * 1500, b"x" * 1500]),
                           headers={"content-type": "multipart/form-data; boundary=zz"})
    assert streamed.status_code == 413
    assert client.post("/other", content=b"x" * 101).status_code == 413
    assert client.post("/other", content=b"x" * 100).json() == {"bytes": 100}


def test_only_types_a_parser_takes_and_bytes_that_may_be_them_pass():
    check_supported("report.pdf", PDF, routes=DEFAULT_ROUTES)
    check_supported("notes.md", b"# notes\n", routes=DEFAULT_ROUTES)
    for name, data, words in (("tool.exe", b"MZ", "no parser takes"), ("noext", b"text", "no parser takes"),
                              ("fake.pdf", b"plain text", "no PDF header"),
                              ("photo.png", PDF, "the content is application/pdf")):
        with pytest.raises(UploadError) as caught:
            check_supported(name, data, routes=DEFAULT_ROUTES)
        assert caught.value.status == 415 and words in str(caught.value) and name in str(caught.value)
    with pytest.raises(UploadError, match=r"text/plain; supported file types: \.pdf$"):
        check_supported("a.txt", b"t", routes={"application/pdf": ["pdf_text"]})


def test_the_collection_is_the_tenants_and_defaults_to_its_first():
    caller = Caller(key_id="k", tenant="beta", role="writer", principals=())
    assert upload_collection(None, caller=None, collections=None, default="default") == "default"
    assert upload_collection("any", caller=None, collections=None, default="default") == "any"
    assert upload_collection(None, caller=caller, collections=["beta", "beta-archive"], default="x") == "beta"
    assert upload_collection("beta-archive", caller=caller, collections=["beta", "beta-archive"],
                             default="x") == "beta-archive"
    with pytest.raises(UploadError) as caught:
        upload_collection("acme", caller=caller, collections=["beta"], default="x")
    assert caught.value.status == 403 and "acme" in str(caught.value)


def test_openapi_declares_the_multipart_upload_body():
    from kb_ray.serving.deployments import api

    body = api.openapi()["paths"]["/v1/documents"]["post"]["requestBody"]
    schema = body["content"]["multipart/form-data"]["schema"]
    assert body["required"] and schema["required"] == ["file"]
    assert set(schema["properties"]) == {"file", "collection", "tags", "acl", "metadata"}
