"""``BlobStore``: content-addressed blobs under ``{kb_root}/blobs/<kind>/`` — rendered pages
(``pages``) and figure crops (``figures``) as PNGs, source bytes (``raw``: uploads, and
batch sources with ``ingest.keep_raw``) as they came, and the viewer's page renders
(``renders``: a cache named by a hash of raw sha, page, dpi and renderer) with the PDFs that
presentations were converted to for them (``conversions``: named by a hash of raw sha and
converter); any of those may be deleted, kb_ray/search/page_images.py.

A blob's name is its sha256 (a render's or conversion's: its cache key; ``<sha[:2]>/<sha>.png``; a raw blob has no suffix:
``<sha[:2]>/<sha>``), so writing is idempotent and an unchanged page costs one existence
check. A name never comes from a client: :meth:`BlobStore.put_bytes` hashes the bytes itself
(:meth:`BlobStore.put_stream` while copying them, never holding them whole).
``kb-ray purge`` does not delete raw blobs yet (queued uploads and citations of changed
sources read them). Files go through the filesystem that
:func:`kb_ray.catalog.storage.filesystem` builds from the catalog's storage options
(local disk, S3, or any fsspec URI), so blobs live wherever the Delta tables live.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import BinaryIO

import pyarrow.fs as pafs

from kb_ray.catalog.storage import ensure_dir, filesystem, join_uri, normalize_root

BLOB_KINDS = ("pages", "figures", "raw", "renders", "conversions")
_SUFFIX = {"pages": ".png", "figures": ".png", "raw": "", "renders": ".png", "conversions": ".pdf"}
_SHA = re.compile(r"[0-9a-f]{64}")


class BlobStore:
    def __init__(self, kb_root: str, *, kind: str, storage_options: dict[str, str] | None = None) -> None:
        if kind not in BLOB_KINDS:
            raise ValueError(f"unknown blob kind {kind!r}; one of {BLOB_KINDS}")
        self.root = join_uri(normalize_root(kb_root), "blobs", kind)
        self.suffix = _SUFFIX[kind]
        self.storage_options = dict(storage_options or {})
        self._fs, self._root_path = filesystem(self.root, self.storage_options)

    def uri(self, sha: str) -> str:
        return join_uri(self.root, sha[:2], f"{_checked(sha)}{self.suffix}")

    def _path(self, sha: str) -> str:
        return f"{self._root_path.rstrip('/')}/{sha[:2]}/{_checked(sha)}{self.suffix}"

    def exists(self, sha: str) -> bool:
        return self._fs.get_file_info(self._path(sha)).type != pafs.FileType.NotFound

    def put(self, sha: str, png: bytes) -> bool:
        """Write the blob unless it is there already; True when written."""
        if self.exists(sha):
            return False
        ensure_dir(join_uri(self.root, sha[:2]))
        temp = f"{self._path(sha)}.{uuid.uuid4().hex}.tmp"  # concurrent writers of one sha
        with self._fs.open_output_stream(temp) as stream:
            stream.write(png)
        self._fs.move(temp, self._path(sha))
        return True

    def put_bytes(self, data: bytes) -> str:
        """Store ``data`` under its own sha256 (written once); returns the sha."""
        sha = hashlib.sha256(data).hexdigest()
        self.put(sha, data)
        return sha

    def put_stream(self, stream: BinaryIO, *, chunk_bytes: int = 1 << 20) -> tuple[str, int]:
        """Store what ``stream`` reads under its sha256, copied ``chunk_bytes`` at a time (an
        upload is never whole in memory); ``(sha, size)``."""
        ensure_dir(self.root)
        temp = f"{self._root_path.rstrip('/')}/{uuid.uuid4().hex}.tmp"  # named once hashed
        digest, size = hashlib.sha256(), 0
        with self._fs.open_output_stream(temp) as out:
            while chunk := stream.read(chunk_bytes):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
        sha = digest.hexdigest()
        if self.exists(sha):
            self._fs.delete_file(temp)
        else:
            ensure_dir(join_uri(self.root, sha[:2]))
            self._fs.move(temp, self._path(sha))
        return sha, size

    def get(self, sha: str) -> bytes:
        with self._fs.open_input_stream(self._path(sha)) as stream:
            return stream.read()

    def list_shas(self) -> list[str]:
        selector = pafs.FileSelector(self._root_path, recursive=True, allow_not_found=True)
        names = (info.base_name for info in self._fs.get_file_info(selector) if info.type == pafs.FileType.File)
        return sorted(name[:len(name) - len(self.suffix)] for name in names
                      if name.endswith(self.suffix) and _SHA.fullmatch(name[:len(name) - len(self.suffix)]))

    def delete(self, shas: list[str]) -> int:
        for sha in shas:
            self._fs.delete_file(self._path(sha))
        return len(shas)


def _checked(sha: str) -> str:
    """``sha`` when it is a lowercase sha256 hex digest: a blob path is built from nothing else."""
    if not _SHA.fullmatch(sha or ""):
        raise ValueError(f"not a sha256 hex digest: {sha!r}")
    return sha
