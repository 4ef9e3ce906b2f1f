"""Model weights come only from local directories: the one check every model loader makes."""

from __future__ import annotations

from pathlib import Path

from kb_ray.errors import KbRayError


def local_model_dir(path: str | Path, *, what: str, kind: str) -> Path:
    """``path`` resolved, when it is a saved model directory (it has ``config.json``); else a
    :class:`KbRayError` naming ``what``, the path and the ``kind`` of directory expected.
    Models are never downloaded."""
    path = Path(path).expanduser()
    if not path.is_dir() or not (path / "config.json").is_file():
        raise KbRayError(f"{what} not found at {path}: expected a saved {kind} directory with config.json; "
                         "models are never downloaded, so copy the weights there first")
    return path.resolve()
