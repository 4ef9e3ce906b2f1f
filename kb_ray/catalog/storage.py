"""Where catalog files live: URIs under ``kb_root`` and the filesystem to reach them.

delta-rs opens tables itself from a URI plus ``storage_options``; this module covers the
few files kb-ray writes directly (worker-written Parquet data files, the catalog marker)
with a :mod:`pyarrow.fs` filesystem built from the same options, so a local path and
``s3://bucket/prefix`` go through one code path.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

import pyarrow.fs as pafs

from kb_ray.errors import CatalogError

# delta-rs / object_store option names → pyarrow.fs.S3FileSystem arguments.
_S3_OPTIONS = {
    "AWS_ACCESS_KEY_ID": "access_key",
    "AWS_SECRET_ACCESS_KEY": "secret_key",
    "AWS_SESSION_TOKEN": "session_token",
    "AWS_REGION": "region",
    "AWS_ENDPOINT_URL": "endpoint_override",
    "AWS_ENDPOINT": "endpoint_override",
}


def is_local(uri: str) -> bool:
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(uri: str) -> str:
    return urlparse(uri).path if uri.startswith("file://") else uri


def normalize_root(kb_root: str) -> str:
    """Absolute local path, or the URI unchanged (minus a trailing slash)."""
    if is_local(kb_root):
        return os.path.abspath(os.path.expanduser(local_path(kb_root)))
    return kb_root.rstrip("/")


def join_uri(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *(part.strip("/") for part in parts)])


def filesystem(uri: str, storage_options: dict[str, str] | None) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for ``uri`` and the path of ``uri`` inside it."""
    if is_local(uri):
        return pafs.LocalFileSystem(), local_path(uri)
    parsed = urlparse(uri)
    if parsed.scheme in ("s3", "s3a"):
        return _s3_filesystem(storage_options or {}), f"{parsed.netloc}{parsed.path}"
    return _fsspec_filesystem(uri, storage_options or {})


def _s3_filesystem(options: dict[str, str]) -> pafs.FileSystem:
    kwargs = {_S3_OPTIONS[k.upper()]: v for k, v in options.items() if k.upper() in _S3_OPTIONS}
    endpoint = kwargs.get("endpoint_override", "")
    if endpoint.startswith("http://"):
        kwargs["scheme"] = "http"
    if endpoint:
        kwargs["endpoint_override"] = endpoint.split("://", 1)[-1]
    return pafs.S3FileSystem(**kwargs)


def _fsspec_filesystem(uri: str, options: dict[str, str]) -> tuple[pafs.FileSystem, str]:
    try:
        import fsspec
    except ImportError as exc:  # pragma: no cover - fsspec is a core dependency
        raise CatalogError(f"cannot open {uri}: pip install fsspec") from exc
    fs, path = fsspec.core.url_to_fs(uri)
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def ensure_dir(uri: str) -> None:
    """Create a local directory (object stores have no directories to create)."""
    if is_local(uri):
        os.makedirs(local_path(uri), exist_ok=True)


def read_text(uri: str, storage_options: dict[str, str] | None) -> str | None:
    """The text of a small file, or ``None`` when it does not exist."""
    fs, path = filesystem(uri, storage_options)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return None
    with fs.open_input_stream(path) as stream:
        return stream.read().decode("utf-8")


def write_text(uri: str, text: str, storage_options: dict[str, str] | None) -> None:
    fs, path = filesystem(uri, storage_options)
    with fs.open_output_stream(path) as stream:
        stream.write(text.encode("utf-8"))
