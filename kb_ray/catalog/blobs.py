"""``BlobStore``: content-addressed PNGs under ``{kb_root}/blobs/<kind>/`` — rendered pages
(``pages``) and figure crops (``figures``).

A blob's name is its sha256 (``<sha[:2]>/<sha>.png``), so writing is idempotent and an
unchanged page costs one existence check. Files go through the filesystem that
:func:`kb_ray.catalog.storage.filesystem` builds from the catalog's storage options
(local disk, S3, or any fsspec URI), so blobs live wherever the Delta tables live.
"""

from __future__ import annotations

import uuid

import pyarrow.fs as pafs

from kb_ray.catalog.storage import ensure_dir, filesystem, join_uri, normalize_root

BLOB_KINDS = ("pages", "figures")


class BlobStore:
    def __init__(self, kb_root: str, *, kind: str, storage_options: dict[str, str] | None = None) -> None:
        if kind not in BLOB_KINDS:
            raise ValueError(f"unknown blob kind {kind!r}; one of {BLOB_KINDS}")
        self.root = join_uri(normalize_root(kb_root), "blobs", kind)
        self.storage_options = dict(storage_options or {})
        self._fs, self._root_path = filesystem(self.root, self.storage_options)

    def uri(self, sha: str) -> str:
        return join_uri(self.root, sha[:2], f"{sha}.png")

    def _path(self, sha: str) -> str:
        return f"{self._root_path.rstrip('/')}/{sha[:2]}/{sha}.png"

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

    def get(self, sha: str) -> bytes:
        with self._fs.open_input_stream(self._path(sha)) as stream:
            return stream.read()

    def list_shas(self) -> list[str]:
        selector = pafs.FileSelector(self._root_path, recursive=True, allow_not_found=True)
        return sorted(info.base_name[:-4] for info in self._fs.get_file_info(selector)
                      if info.type == pafs.FileType.File and info.base_name.endswith(".png"))

    def delete(self, shas: list[str]) -> int:
        for sha in shas:
            self._fs.delete_file(self._path(sha))
        return len(shas)
