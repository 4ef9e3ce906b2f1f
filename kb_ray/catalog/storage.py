"""Where kb-ray files live, and the one mapping from ``storage_options`` to filesystems.

Config ``storage_options`` are delta-rs (object_store) options, e.g. ``AWS_ENDPOINT_URL``,
``AWS_REGION``, ``AWS_ALLOW_HTTP``, ``conditional_put``; delta-rs takes them as they are.
Everything kb-ray reads or writes itself goes through a filesystem built here from the
same options, so a local path and ``s3://bucket/prefix`` share one code path:

* :func:`fsspec_filesystem` / :func:`fsspec_options` — s3fs (or any fsspec protocol):
  source listing, fetching source bytes, index generation files.
* :func:`filesystem` — a :mod:`pyarrow.fs` filesystem: worker-written Parquet data files,
  the catalog marker, page blobs.

Credentials come from the environment (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``
or an instance role), never from config files; keys passed in ``storage_options`` anyway
are honoured. Options of other object stores are passed to delta-rs only: their fsspec
filesystems use their own environment defaults.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from kb_ray.errors import CatalogError

S3_SCHEMES = ("s3", "s3a")

# object_store accepts each key with or without the ``aws_`` prefix, in any case.
_S3_KEYS = {
    "access_key_id": "access_key_id", "secret_access_key": "secret_access_key",
    "session_token": "session_token", "token": "session_token",
    "region": "region", "default_region": "region",
    "endpoint_url": "endpoint", "endpoint": "endpoint",
}


def is_local(uri: str) -> bool:
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def is_s3(uri: str) -> bool:
    return urlparse(uri).scheme in S3_SCHEMES


def local_path(uri: str) -> str:
    return urlparse(uri).path if uri.startswith("file://") else uri


def normalize_root(kb_root: str) -> str:
    """Absolute local path, or the URI unchanged (minus a trailing slash)."""
    if is_local(kb_root):
        return os.path.abspath(os.path.expanduser(local_path(kb_root)))
    return kb_root.rstrip("/")


def join_uri(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *(part.strip("/") for part in parts)])


def s3_settings(storage_options: dict[str, str] | None) -> dict[str, str]:
    """The S3 settings named in delta-rs style options: endpoint, region, credentials."""
    settings: dict[str, str] = {}
    for key, value in (storage_options or {}).items():
        name = key.lower().removeprefix("aws_")
        if name in _S3_KEYS and value not in (None, ""):
            settings[_S3_KEYS[name]] = str(value)
    return settings


# -- fsspec ----------------------------------------------------------------------------


def fsspec_options(uri: str, storage_options: dict[str, str] | None) -> dict[str, Any]:
    """Keyword arguments for ``fsspec.open`` / ``fsspec.filesystem`` on ``uri``."""
    if not is_s3(uri):
        return {}
    settings = s3_settings(storage_options)
    client_kwargs = {name: settings[key] for key, name in (("endpoint", "endpoint_url"), ("region", "region_name"))
                     if key in settings}
    options: dict[str, Any] = {"client_kwargs": client_kwargs, "use_listings_cache": False}
    for key, name in (("access_key_id", "key"), ("secret_access_key", "secret"), ("session_token", "token")):
        if key in settings:
            options[name] = settings[key]
    return options


def fsspec_filesystem(uri: str, storage_options: dict[str, str] | None):
    """An fsspec filesystem for ``uri`` and the path of ``uri`` inside it."""
    try:
        import fsspec
    except ImportError as exc:  # pragma: no cover - fsspec is a core dependency
        raise CatalogError(f"cannot open {uri}: pip install fsspec") from exc
    if is_local(uri):
        return fsspec.filesystem("file"), os.path.abspath(local_path(uri))
    try:
        return fsspec.core.url_to_fs(uri, **fsspec_options(uri, storage_options))
    except ImportError as exc:
        raise CatalogError(f"cannot open {uri}: {exc} (for s3:// install kb-ray[s3], i.e. pip install s3fs)") from exc


# -- pyarrow ---------------------------------------------------------------------------


def filesystem(uri: str, storage_options: dict[str, str] | None) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for ``uri`` and the path of ``uri`` inside it."""
    if is_local(uri):
        return pafs.LocalFileSystem(), local_path(uri)
    parsed = urlparse(uri)
    if parsed.scheme in S3_SCHEMES:
        return _s3_filesystem(storage_options), f"{parsed.netloc}{parsed.path}"
    fs, path = fsspec_filesystem(uri, storage_options)
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def _s3_filesystem(storage_options: dict[str, str] | None) -> pafs.FileSystem:
    settings = s3_settings(storage_options)
    names = {"access_key_id": "access_key", "secret_access_key": "secret_key",
             "session_token": "session_token", "region": "region"}
    kwargs: dict[str, Any] = {names[key]: value for key, value in settings.items() if key in names}
    endpoint = settings.get("endpoint", "")
    if endpoint:
        scheme, _, host = endpoint.rpartition("://")
        kwargs["endpoint_override"] = host.rstrip("/")
        kwargs["scheme"] = scheme or "https"
    return pafs.S3FileSystem(**kwargs)


# -- small files -----------------------------------------------------------------------


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
    """Write a small file in one PUT (atomic on object stores)."""
    fs, path = filesystem(uri, storage_options)
    with fs.open_output_stream(path) as stream:
        stream.write(text.encode("utf-8"))
