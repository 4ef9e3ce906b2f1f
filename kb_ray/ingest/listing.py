"""List sources as a stream of Arrow batches (one directory at a time, through fsspec).

The driver never holds per-file Python objects for the whole corpus: each directory's
listing (paged by the filesystem; s3fs pages through ListObjectsV2) becomes an Arrow
record batch right away, and ids are computed by DuckDB in the planner. Keys are
normalized URIs: absolute POSIX paths for local files, ``scheme://bucket/key`` otherwise.
Object stores are reached with the config's ``storage_options`` through
:func:`kb_ray.catalog.storage.fsspec_filesystem`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime, timezone

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.storage import fsspec_filesystem
from kb_ray.errors import SourceError
from kb_ray.ingest.metadata import SIDECAR_REGEX

LISTING_SCHEMA = pa.schema([
    ("collection", pa.string()), ("uri", pa.string()), ("key", pa.string()),
    ("relative_path", pa.string()), ("size", pa.int64()), ("mtime", pa.timestamp("us", tz="UTC")),
])


def _filesystem(source: str, storage_options: dict[str, str]) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, path = fsspec_filesystem(source, storage_options)
    return fs, fs._strip_protocol(path)


def _uri(fs: fsspec.AbstractFileSystem, path: str) -> str:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return path if protocol in ("file", "local") else f"{protocol}://{path}"


def root_uri(source: str, *, storage_options: dict[str, str] | None = None) -> str:
    """``source`` as its listing names it: every URI listed under it is this one (a file
    source) or starts with it and a ``/`` (kb_ray/ingest/planning.py scopes ``--sync full`` so)."""
    fs, root = _filesystem(source, storage_options or {})
    return _uri(fs, root)


def _mtime(info: dict) -> datetime | None:
    value = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=timezone.utc)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return None


def list_source(source: str, *, collection: str, include: list[str],
                storage_options: dict[str, str] | None = None) -> Iterator[pa.RecordBatch]:
    """Yield one record batch per directory under ``source`` (or one for a single file).

    A missing source raises ``SourceError`` at once, before any batch is pulled."""
    fs, root = _filesystem(source, storage_options or {})
    if not fs.exists(root):
        raise SourceError(f"source {source} does not exist")
    if fs.isfile(root):
        return iter([_batch(fs, collection, root.rsplit("/", 1)[0], {root: fs.info(root)}, include)])
    return _walk(fs, root, collection, include)


def _walk(fs: fsspec.AbstractFileSystem, root: str, collection: str, include: list[str]) -> Iterator[pa.RecordBatch]:
    for _, _, files in fs.walk(root, detail=True):
        infos = {info["name"]: info for info in files.values() if _is_file(info)}
        if infos:
            yield _batch(fs, collection, root, infos, include)


def _is_file(info: dict) -> bool:
    """A file, or a local symlink to one: listed, so the fetch stage can read it or refuse it
    when it leads outside the sources (reason ``outside_source``). Directory links are not walked."""
    return info.get("type") == "file" or bool(info.get("islink") and os.path.isfile(info["name"]))


def _batch(fs, collection: str, root: str, infos: dict[str, dict], include: list[str]) -> pa.RecordBatch:
    infos = {printable_name(name): info for name, info in infos.items()}
    names = sorted(infos)
    relative = [name[len(root):].lstrip("/") for name in names]
    batch = pa.RecordBatch.from_pydict({
        "collection": [collection] * len(names), "uri": [_uri(fs, name) for name in names],
        "key": [_uri(fs, name) for name in names], "relative_path": relative,
        "size": [int(infos[name].get("size") or 0) for name in names],
        "mtime": [_mtime(infos[name]) for name in names],
    }, schema=LISTING_SCHEMA)
    return batch.filter(_included(batch.column("relative_path"), include))


def printable_name(path: str) -> str:
    """``path`` as UTF-8 text: a local name that is not UTF-8 (bytes Python keeps as
    surrogates) shows its undecodable bytes as U+FFFD. It is listed, and the fetch stage
    fails it with reason ``invalid_name`` instead of one bad name stopping the listing."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def glob_to_regex(glob: str) -> str:
    """A path glob as an RE2 regex: ``**/`` any directories, ``*`` and ``?`` within one."""
    out, index = [], 0
    while index < len(glob):
        if glob.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif glob.startswith("**", index):
            out.append(".*")
            index += 2
        else:
            char = glob[index]
            out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
            index += 1
    return "^" + "".join(out) + "$"


def _included(paths: pa.Array, include: list[str]) -> pa.Array:
    """Included by a glob, or a metadata sidecar (whatever the globs say); never hidden."""
    hidden = pc.match_substring_regex(paths, r"(^|/)\.")
    pattern = "|".join(f"(?:{glob_to_regex(glob)})" for glob in include) or ".*"
    wanted = pc.or_(pc.match_substring_regex(paths, pattern), pc.match_substring_regex(paths, SIDECAR_REGEX))
    return pc.and_(wanted, pc.invert(hidden))


def list_sources(sources: list[str], *, collection: str, include: list[str],
                 storage_options: dict[str, str] | None = None,
                 sidecars: set[str] | None = None) -> pa.RecordBatchReader:
    """The whole listing as a stream of record batches (the planner's input), read lazily:
    a directory is listed when the planner pulls its batch. Metadata sidecars are not
    documents: they are taken out of the stream and their URIs added to ``sidecars``."""
    streams = [list_source(source, collection=collection, include=include, storage_options=storage_options)
               for source in sources]  # checks every source exists before the planner pulls
    found = sidecars if sidecars is not None else set()
    batches = (_without_sidecars(batch, found) for stream in streams for batch in stream)
    return pa.RecordBatchReader.from_batches(LISTING_SCHEMA, batches)


def _without_sidecars(batch: pa.RecordBatch, sidecars: set[str]) -> pa.RecordBatch:
    is_sidecar = pc.match_substring_regex(batch.column("uri"), SIDECAR_REGEX)
    sidecars.update(batch.filter(is_sidecar).column("uri").to_pylist())
    return batch.filter(pc.invert(is_sidecar))
