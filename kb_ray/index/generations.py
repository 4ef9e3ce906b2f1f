"""Where generations live and which one is live.

Layout under ``{kb_root}/indexes/``::

    CURRENT                      # the live generation id (one line)
    gen_…/manifest.json          # written last: a generation without it is incomplete
    gen_…/shard-000/hydration.parquet, dense.faiss, lexical/

Index files are built in a local staging folder and then published: renamed into place on
a local root, uploaded with fsspec on an object store (the filesystem that
:func:`kb_ray.catalog.storage.fsspec_filesystem` builds from ``storage_options``).
``CURRENT`` is replaced atomically (temp file + ``os.replace`` locally; a single object PUT
on object stores). FAISS and BM25 need local files, so searchers load a remote generation
from a local copy (:func:`local_generation_dir`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from kb_ray.catalog.storage import fsspec_filesystem, is_local, join_uri, local_path, normalize_root
from kb_ray.errors import KbRayError
from kb_ray.index.manifest import MANIFEST_NAME, GenerationManifest

logger = logging.getLogger(__name__)

CURRENT_NAME = "CURRENT"


class GenerationError(KbRayError):
    """An index generation is missing, incomplete, or cannot be switched or dropped."""


def indexes_uri(kb_root: str) -> str:
    return join_uri(normalize_root(kb_root), "indexes")


def generation_uri(kb_root: str, generation_id: str) -> str:
    return join_uri(indexes_uri(kb_root), generation_id)


def _fs(uri: str, storage_options: dict[str, str] | None):
    return fsspec_filesystem(uri, storage_options)


def read_text_file(uri: str, storage_options: dict[str, str] | None = None) -> str | None:
    if is_local(uri):
        path = Path(local_path(uri))
        return path.read_text(encoding="utf-8") if path.is_file() else None
    fs, path = _fs(uri, storage_options)
    try:
        return fs.cat_file(path).decode("utf-8")
    except FileNotFoundError:
        return None


def read_current(kb_root: str, *, storage_options: dict[str, str] | None = None) -> str | None:
    """The live generation id, or ``None`` when no generation was switched to yet."""
    text = read_text_file(join_uri(indexes_uri(kb_root), CURRENT_NAME), storage_options)
    if text is None:
        return None
    return text.strip() or None


def load_manifest(kb_root: str, generation_id: str, *,
                  storage_options: dict[str, str] | None = None) -> GenerationManifest:
    uri = join_uri(generation_uri(kb_root, generation_id), MANIFEST_NAME)
    text = read_text_file(uri, storage_options)
    if text is None:
        raise GenerationError(f"index generation {generation_id} has no manifest at {uri}: it was never "
                              "built, was dropped, or its build did not finish; run build_index")
    return GenerationManifest.from_json(text)


def switch_generation(kb_root: str, generation_id: str, *, storage_options: dict[str, str] | None = None) -> None:
    """Make ``generation_id`` the live generation (atomic replace of ``CURRENT``)."""
    load_manifest(kb_root, generation_id, storage_options=storage_options)  # refuse incomplete ones
    write_pointer(join_uri(indexes_uri(kb_root), CURRENT_NAME), generation_id, storage_options)
    logger.info("switched live index generation to %s", generation_id)


def write_pointer(uri: str, value: str, storage_options: dict[str, str] | None = None) -> None:
    """Replace a one-line pointer file atomically (``CURRENT``, a generation's segment pointer)."""
    if is_local(uri):
        _replace_local(Path(local_path(uri)), value + "\n")
    else:
        fs, path = _fs(uri, storage_options)
        fs.pipe_file(path, (value + "\n").encode("utf-8"))


def _replace_local(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def drop_generation(kb_root: str, generation_id: str, *, storage_options: dict[str, str] | None = None) -> bool:
    """Delete a generation's files; refuses the live one. False when nothing was there."""
    if read_current(kb_root, storage_options=storage_options) == generation_id:
        raise GenerationError(f"refusing to drop {generation_id}: it is the live generation; "
                              "switch to another generation first")
    uri = generation_uri(kb_root, generation_id)
    if is_local(uri):
        if not Path(local_path(uri)).exists():
            return False
        shutil.rmtree(local_path(uri))
    else:
        fs, path = _fs(uri, storage_options)
        if not fs.exists(path):
            return False
        fs.rm(path, recursive=True)
    logger.info("dropped index generation %s", generation_id)
    return True


def staging_dir(kb_root: str, generation_id: str) -> Path:
    """A fresh local folder to build a generation in (beside the target when local)."""
    if is_local(kb_root):
        folder = Path(local_path(indexes_uri(kb_root))) / f".{generation_id}.staging-{uuid.uuid4().hex[:8]}"
        folder.mkdir(parents=True)
        return folder
    return Path(tempfile.mkdtemp(prefix=f"{generation_id}-"))


def publish(staged: Path, kb_root: str, generation_id: str, *, storage_options: dict[str, str] | None = None) -> None:
    """Move a fully built staging folder to its final place (manifest included)."""
    publish_folder(staged, generation_uri(kb_root, generation_id), storage_options=storage_options)


def publish_folder(staged: Path, target: str, *, storage_options: dict[str, str] | None = None) -> None:
    """Rename (local) or upload (object store, manifest last) a staged folder to ``target``."""
    if is_local(target):
        Path(local_path(target)).parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(staged, local_path(target))
        except OSError:  # a concurrent build of the same generation won; same content
            shutil.rmtree(staged, ignore_errors=True)
        return
    fs, path = _fs(target, storage_options)
    manifest = staged / MANIFEST_NAME
    for file in sorted(p for p in staged.rglob("*") if p.is_file() and p != manifest):
        fs.put_file(str(file), f"{path}/{file.relative_to(staged).as_posix()}")
    fs.put_file(str(manifest), f"{path}/{MANIFEST_NAME}")  # completion marker last
    shutil.rmtree(staged, ignore_errors=True)


def local_generation_dir(kb_root: str, generation_id: str, *, storage_options: dict[str, str] | None = None,
                         cache_root: str | Path | None = None) -> Path:
    """A local folder holding the generation's files (downloaded once for remote roots).

    FAISS and BM25 load from local files, so a remote generation is copied into
    ``cache_root`` (default: ``KB_RAY_INDEX_CACHE`` or ``<tmp>/kb_ray_index_cache``) under a
    folder named by its URI: the same generation id under two kb_roots never shares one.
    The copy is made in a temporary folder and renamed into place, so a folder that
    exists is complete (generations are immutable once published).
    """
    return local_copy(generation_uri(kb_root, generation_id), generation_id, storage_options=storage_options,
                      cache_root=cache_root)


def local_copy(uri: str, name: str, *, storage_options: dict[str, str] | None = None,
               cache_root: str | Path | None = None) -> Path:
    """A local folder holding an immutable published folder with a manifest (a generation's
    shards or one of its delta segments): the folder itself on a local root, else a cached copy."""
    if is_local(uri):
        return Path(local_path(uri))
    root = Path(cache_root or os.environ.get("KB_RAY_INDEX_CACHE")
                or Path(tempfile.gettempdir()) / "kb_ray_index_cache")
    cache = root / f"{name}-{hashlib.sha256(uri.encode()).hexdigest()[:12]}"
    if (cache / MANIFEST_NAME).is_file():
        return cache
    shutil.rmtree(cache, ignore_errors=True)  # a copy left incomplete by an older kb-ray
    root.mkdir(parents=True, exist_ok=True)
    download = Path(tempfile.mkdtemp(prefix=f".{cache.name}.", dir=root))
    try:
        _download(uri, download, storage_options)
        os.replace(download, cache)
    except OSError:
        if not (cache / MANIFEST_NAME).is_file():
            raise
    finally:
        shutil.rmtree(download, ignore_errors=True)  # gone after the rename, or the loser's copy
    return cache


def _download(uri: str, target: Path, storage_options: dict[str, str] | None) -> None:
    fs, path = _fs(uri, storage_options)
    path = path.rstrip("/")
    files = [name for name in fs.find(path) if not name.endswith("/")]
    if f"{path}/{MANIFEST_NAME}" not in files:
        raise GenerationError(f"index generation at {uri} has no {MANIFEST_NAME}: it is incomplete or was dropped")
    for name in files:
        local = target / name[len(path) + 1:]
        local.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(name, str(local))
    logger.info("downloaded index generation %s (%d files) to %s", uri, len(files), target)
