"""Per-document tags, ACL principals and metadata at ingest.

Three layers, later ones win: the source's settings (``ingest.sources`` entries), the
Markdown front matter (``---`` YAML block at the top of a ``.md`` file), then a sidecar
``<file>.meta.json`` or ``<file>.meta.yaml``. Lists (``tags``, ``acl``) are replaced,
``metadata`` dicts are merged, ``title`` overrides the parsed title. Sidecars are listed
with the sources but never ingested as documents.

Resolution runs on the driver after planning. ``meta_sha`` fingerprints what lies outside
the file's bytes (the source settings and the sidecar's bytes); it is stored in
``sources.meta_sha``, so a run sees a sidecar edit on an unchanged file and updates the
``documents`` row without a new version (no parse, no embedding).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from kb_ray.catalog.storage import fsspec_filesystem
from kb_ray.config import SourceSettings
from kb_ray.errors import KbRayError

SIDECAR_SUFFIXES = (".meta.json", ".meta.yaml")
SIDECAR_REGEX = r"\.meta\.(json|yaml)$"
FRONT_MATTER_SUFFIXES = (".md", ".markdown")
FRONT_MATTER_MAX_BYTES = 64 * 1024
_KEYS = ("tags", "acl", "metadata", "title")


class MetadataError(KbRayError):
    """A sidecar or front matter that is not a mapping of tags, acl, metadata and title."""


@dataclass(frozen=True)
class DocumentMetadata:
    tags: list[str] = field(default_factory=list)
    acl: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    title: str | None = None
    meta_sha: str = ""

    @property
    def metadata_json(self) -> str:
        return json.dumps(self.metadata, sort_keys=True, default=str)


def validated(data: Any, *, where: str) -> dict[str, Any]:
    """``data`` checked as a metadata mapping; anything else raises :class:`MetadataError`."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MetadataError(f"{where} must be a mapping of {', '.join(_KEYS)}, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise MetadataError(f"{where} has unknown key(s) {unknown}; allowed: {', '.join(_KEYS)}")
    for key in ("tags", "acl"):
        if key in data and not (isinstance(data[key], list) and all(isinstance(v, str) for v in data[key])):
            raise MetadataError(f"{where}: {key!r} must be a list of strings, got {data[key]!r}")
    if "metadata" in data and not isinstance(data["metadata"], dict):
        raise MetadataError(f"{where}: 'metadata' must be a mapping, got {data['metadata']!r}")
    if "title" in data and not isinstance(data["title"], str):
        raise MetadataError(f"{where}: 'title' must be a string, got {data['title']!r}")
    return data


def parse_sidecar(raw: bytes, *, uri: str) -> dict[str, Any]:
    try:
        data = json.loads(raw) if uri.endswith(".json") else yaml.safe_load(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise MetadataError(f"sidecar {uri} is not valid {'JSON' if uri.endswith('.json') else 'YAML'}: {exc}") from None
    return validated(data, where=f"sidecar {uri}")


def parse_front_matter(head: bytes, *, uri: str) -> dict[str, Any]:
    """The YAML front matter at the top of a Markdown file's first bytes ({} when none).

    The block stays in the canonical text (spans keep pointing at the file's own text)."""
    text = head.decode("utf-8", "replace").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    try:
        data = yaml.safe_load(text[4:end])
    except yaml.YAMLError as exc:
        raise MetadataError(f"front matter of {uri} is not valid YAML: {exc}") from None
    if isinstance(data, dict):  # a block of other keys (e.g. a static-site generator's) is left alone
        data = {key: value for key, value in data.items() if key in _KEYS}
    return validated(data, where=f"front matter of {uri}")


def outside_fingerprint(source: SourceSettings, sidecar: bytes | None) -> str:
    """What can change without the file's bytes changing: the source settings and the sidecar."""
    settings = json.dumps({"tags": source.tags, "acl": source.acl, "metadata": source.metadata},
                          sort_keys=True, default=str)
    digest = hashlib.sha256(settings.encode())
    digest.update(b"\x1f" + (sidecar if sidecar is not None else b"\x00none"))
    return digest.hexdigest()[:32]


def resolve(source: SourceSettings, layers: list[dict[str, Any]], *, meta_sha: str) -> DocumentMetadata:
    """Source settings, then each layer (front matter, sidecar) over it."""
    tags, acl, metadata, title = list(source.tags), list(source.acl), dict(source.metadata), None
    for layer in layers:
        tags = list(layer.get("tags", tags))
        acl = list(layer.get("acl", acl))
        metadata.update(layer.get("metadata") or {})
        title = layer.get("title", title)
    return DocumentMetadata(tags=tags, acl=acl, metadata=metadata, title=title, meta_sha=meta_sha)


def read_document_metadata(uri: str, *, source: SourceSettings, sidecar_uri: str | None, read_file: bool,
                           storage_options: dict[str, str]) -> DocumentMetadata:
    """Resolve one document's metadata; ``read_file`` reads its front matter (Markdown only)."""
    sidecar = _read(sidecar_uri, storage_options, limit=None) if sidecar_uri else None
    layers = []
    if read_file and uri.lower().endswith(FRONT_MATTER_SUFFIXES):
        layers.append(parse_front_matter(_read(uri, storage_options, limit=FRONT_MATTER_MAX_BYTES), uri=uri))
    if sidecar is not None:
        layers.append(parse_sidecar(sidecar, uri=sidecar_uri))
    return resolve(source, layers, meta_sha=outside_fingerprint(source, sidecar))


def _read(uri: str, storage_options: dict[str, str], *, limit: int | None) -> bytes:
    fs, path = fsspec_filesystem(uri, storage_options)
    try:
        with fs.open(path, "rb") as handle:
            return handle.read(limit) if limit else handle.read()
    except OSError as exc:
        raise MetadataError(f"cannot read {uri}: {exc}") from None


def sidecar_for(uri: str, sidecars: set[str]) -> str | None:
    """The sidecar of ``uri`` among the listed ones (``.meta.json`` before ``.meta.yaml``)."""
    return next((uri + suffix for suffix in SIDECAR_SUFFIXES if uri + suffix in sidecars), None)
