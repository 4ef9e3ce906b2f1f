"""API keys, the role table and the forced tenant scope, without Ray (docs/auth.md)."""

from __future__ import annotations

import time

import pytest

from kb_ray.auth.keys import ApiKeyStore, Caller, UnknownKeyError, split_key
from kb_ray.auth.scope import may_see_document, required_role, role_allows, scoped_filter
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import AuthSettings
from kb_ray.errors import KbRayError
from kb_ray.search.filters import FILTER_KEYS


@pytest.fixture()
def store(tmp_path):
    return ApiKeyStore(DeltaCatalog.open(str(tmp_path / "kb")), cache_ttl_s=0.05)


def test_a_key_resolves_to_its_tenant_and_only_its_hash_is_stored(store):
    key, row = store.create(tenant="acme", role="writer", principals=["alice"])
    caller = store.resolve(key)
    assert (caller.tenant, caller.role, caller.principals) == ("acme", "writer", ("alice",))
    stored = store.catalog.read("api_keys").to_pylist()[0]
    assert split_key(key)[1] not in str(stored) and "secret_sha256" not in row
    assert [r["key_id"] for r in store.list()] == [row["key_id"]] and "secret_sha256" not in store.list()[0]


def test_wrong_secrets_and_malformed_keys_resolve_to_nothing(store):
    key, _ = store.create(tenant="acme", role="reader")
    assert store.resolve(key[:-3] + "zzz") is None
    assert store.resolve("kbr_") is None and store.resolve("Bearer x") is None and store.resolve("") is None


def test_a_revoked_key_stops_resolving_after_the_cache_ttl(store):
    key, row = store.create(tenant="acme", role="reader")
    assert store.resolve(key) is not None
    store.revoke(row["key_id"])
    time.sleep(0.06)
    assert store.resolve(key) is None and store.list()[0]["revoked_at"] is not None
    with pytest.raises(UnknownKeyError, match="keys list"):
        store.revoke("nope")


def test_unknown_roles_are_refused(store):
    with pytest.raises(KbRayError, match="unknown role"):
        store.create(tenant="acme", role="root")


def test_the_role_table_denies_by_default():
    assert required_role("POST", "/v1/documents") == "writer"
    assert required_role("DELETE", "/v1/documents/doc_1") == "writer"
    assert required_role("GET", "/v1/documents/doc_1") == "reader" and required_role("POST", "/v1/search") == "reader"
    assert required_role("GET", "/v1/unlisted") is None and required_role("PUT", "/v1/search") is None
    assert role_allows("admin", "writer") and role_allows("writer", "reader")
    assert not role_allows("reader", "writer") and not role_allows("nobody", "reader")


@pytest.mark.parametrize("client, expected", [
    (None, ["beta", "beta-archive"]),
    ({"collection": "beta-archive"}, ["beta-archive"]),
    ({"collection": ["acme", "beta"]}, ["beta"]),
    ({"collection": ["acme"]}, []),
    ({"collection": 7}, ["beta", "beta-archive"]),
])
def test_the_scope_narrows_and_never_widens(client, expected):
    scoped = scoped_filter(client, collections=["beta", "beta-archive"], principals=("p1",))
    assert scoped["collection"] == expected
    assert "acl_any" in FILTER_KEYS and scoped["acl_any"] == ["p1"]


def test_a_client_cannot_claim_principals():
    scoped = scoped_filter({"acl_any": ["ceo"], "tags_any": ["x"]}, collections=["acme"], principals=())
    assert scoped["acl_any"] == [] and scoped["tags_any"] == ["x"]


def test_a_tenant_without_an_entry_owns_its_namesake_collection():
    settings = AuthSettings(enabled=True, tenants={"beta": ["beta", "beta-archive"]})
    assert settings.collections_of("acme") == ["acme"] and settings.collections_of("beta") == ["beta", "beta-archive"]


def test_a_document_is_visible_only_in_the_tenants_collections_and_to_its_acl():
    caller = Caller(key_id="k", tenant="acme", role="reader", principals=("eng",))
    own = ["acme"]
    assert may_see_document(None, {"collection": "other", "acl": ["x"]}, collections=None)  # auth off
    assert may_see_document(caller, {"collection": "acme", "acl": []}, collections=own)
    assert may_see_document(caller, {"collection": "acme", "acl": ["eng", "ops"]}, collections=own)
    assert not may_see_document(caller, {"collection": "acme", "acl": ["ops"]}, collections=own)
    assert not may_see_document(caller, {"collection": "beta", "acl": []}, collections=own)
