"""Content-derived identifiers and fingerprints.

Every id is sha256 over NFC-normalized parts, truncated to 128 bits (32 hex chars) and
given a typed prefix, so ``doc_…`` can never be confused with ``ch_…``.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from typing import Any

_SEPARATOR = "\x1f"  # unit separator: cannot appear in normalized ids or keys
ID_HEX_CHARS = 32


def nfc(text: str) -> str:
    """Unicode NFC normalization, applied to all text before it is hashed."""
    return unicodedata.normalize("NFC", text)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(nfc(text).encode("utf-8"))


def make_id(prefix: str, *parts: object) -> str:
    """``prefix_`` + first 128 bits of sha256 over the NFC-normalized parts."""
    joined = _SEPARATOR.join(nfc(str(part)) for part in parts)
    return f"{prefix}_{sha256_bytes(joined.encode('utf-8'))[:ID_HEX_CHARS]}"


def document_id(*, collection: str, key: str) -> str:
    return make_id("doc", collection, key)


def version_id(*, document_id: str, raw_sha: str, pipeline_fp: str) -> str:
    return make_id("ver", document_id, raw_sha, pipeline_fp)


def element_id(*, version_id: str, ordinal: int) -> str:
    return make_id("el", version_id, ordinal)


def chunk_id(*, document_id: str, chunker_fp: str, content_sha: str, occurrence: int) -> str:
    return make_id("ch", document_id, chunker_fp, content_sha, occurrence)


def fingerprint(*, kind: str, name: str, version: str, config: dict[str, Any]) -> str:
    """Fingerprint of a transformation: class, version and its config (canonical JSON)."""
    payload = json.dumps(
        {"kind": kind, "name": name, "version": version, "config": config},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return make_id("fp", payload)


def combine_fingerprints(*fingerprints: str) -> str:
    """The pipeline fingerprint: one id over the ordered stage fingerprints."""
    return make_id("fp", *fingerprints)
