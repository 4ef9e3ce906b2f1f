"""``ApiKeyStore``: API keys in the catalog table ``api_keys``, stored hashed.

A key reads ``kbr_<key_id>_<secret>``. Only the SHA-256 of the secret is stored; the plaintext
is returned once, by :meth:`ApiKeyStore.create`. :meth:`ApiKeyStore.resolve` finds the row by
``key_id`` and compares hashes with ``hmac.compare_digest``. It reads the table at most once
per ``cache_ttl_s``, so a revoked key stops working within that long.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

import pyarrow as pa

from kb_ray.catalog.contract import table_spec
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.errors import KbRayError

Role = Literal["reader", "writer", "admin"]
ROLES: tuple[str, ...] = ("reader", "writer", "admin")
KEY_PREFIX = "kbr_"
TABLE = "api_keys"


class UnknownKeyError(KbRayError):
    """No API key with that id."""


@dataclass(frozen=True)
class Caller:
    """Who a valid key speaks for."""

    key_id: str
    tenant: str
    role: str
    principals: tuple[str, ...]


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def split_key(key: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a well-formed key, else None."""
    if not key.startswith(KEY_PREFIX):
        return None
    key_id, _, secret = key[len(KEY_PREFIX):].partition("_")
    return (key_id, secret) if key_id and secret else None


class ApiKeyStore:
    def __init__(self, catalog: DeltaCatalog, *, cache_ttl_s: float = 1.0) -> None:
        self.catalog = catalog
        self.cache_ttl_s = cache_ttl_s
        self._rows: dict[str, dict[str, Any]] = {}
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def create(self, *, tenant: str, role: str, principals: list[str] | None = None) -> tuple[str, dict[str, Any]]:
        """A new key: ``(plaintext key, its row without the hash)``. The plaintext is not kept."""
        if role not in ROLES:
            raise KbRayError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
        if not tenant.strip():
            raise KbRayError("the tenant is empty: pass --tenant NAME")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        row = {"key_id": key_id, "secret_sha256": secret_hash(secret), "tenant": tenant, "role": role,
               "principals": list(principals or []), "created_at": datetime.now(timezone.utc), "revoked_at": None}
        self.catalog.append(TABLE, pa.Table.from_pylist([row], schema=table_spec(TABLE).schema))
        return f"{KEY_PREFIX}{key_id}_{secret}", _public(row)

    def list(self) -> list[dict[str, Any]]:
        """Every key's row, oldest first, without the hash."""
        rows = self.catalog.read(TABLE).to_pylist()
        return [_public(row) for row in sorted(rows, key=lambda r: r["created_at"])]

    def revoke(self, key_id: str) -> None:
        """Mark the key revoked (a key revoked already keeps its first revocation time)."""
        rows = [row for row in self.catalog.read(TABLE).to_pylist() if row["key_id"] == key_id]
        if not rows:
            raise UnknownKeyError(f"no API key {key_id!r}; `kb-ray keys list` shows the key ids")
        if rows[0]["revoked_at"] is None:
            rows[0]["revoked_at"] = datetime.now(timezone.utc)
            self.catalog.merge_upsert(TABLE, pa.Table.from_pylist(rows[:1], schema=table_spec(TABLE).schema),
                                      keys=("key_id",))

    def resolve(self, key: str) -> Caller | None:
        """The caller of a valid, unrevoked key; None for anything else."""
        parts = split_key(key)
        if parts is None:
            return None
        row = self._cached_rows().get(parts[0])
        if row is None or row["revoked_at"] is not None:
            return None
        if not hmac.compare_digest(row["secret_sha256"], secret_hash(parts[1])):
            return None
        return Caller(key_id=row["key_id"], tenant=row["tenant"], role=row["role"],
                      principals=tuple(row["principals"] or ()))

    def _cached_rows(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            if time.monotonic() - self._read_at >= self.cache_ttl_s:
                self._rows = {row["key_id"]: row for row in self.catalog.read(TABLE).to_pylist()}
                self._read_at = time.monotonic()
            return self._rows


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in row.items() if name != "secret_sha256"}
