"""The probe check of a remote embedder: does the server still serve the vectors its name stood for?

A remote embedder's fingerprint is computed from settings (model name, dimensions,
normalization, template), so a server that swaps the weights behind the same name — a new
revision, another quantization, a different model under an alias — would silently mix two
vector spaces in one index. So every :class:`~kb_ray.embedding.remote.RemoteTextEmbedder`
embeds :data:`PROBE_TEXT` when it is built and compares the vector with the one recorded
for its fingerprint in ``<cache_dir>/remote-probes/<fingerprint>.json`` (written by the
first embedder to get there). A vector further than :data:`PROBE_TOLERANCE` from the record
raises :class:`ProbeMismatchError`.

The tolerance is the one that decides whether two local runtimes share a fingerprint,
:data:`~kb_ray.embedding.fingerprint.VECTOR_TOLERANCE` = 1e-3 in ``|cos - 1|``: a server
running the same weights in fp16, in another batch or on another GPU stays below it (torch
fp16 measured 3.1e-4, batch-to-batch noise 2.4e-7), while anything that changes rankings —
int8 weights measured 1.1e-2 to 1.6e-2, and another model's vectors are unrelated — lies
far above it.
Without normalization the vector's length matters to inner products too, so its relative
change must stay under the same bound. A different length of the vector always fails.

The record lives beside the exported ONNX graphs (``embedding.cache_dir``). Processes on one
machine share it; on a cluster, point ``embedding.cache_dir`` at a volume every node mounts
so that an embed actor on one node and the query embedder on another check against one record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kb_ray.embedding.fingerprint import VECTOR_TOLERANCE
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

PROBE_TEXT = "kb-ray embedding probe: the AquaFlow AF-220 pump's mechanical seal kit is part AF-SK-118."
PROBE_TOLERANCE = VECTOR_TOLERANCE  # max |cos - 1| (and relative norm change) against the record
PROBE_DIR = "remote-probes"


class ProbeMismatchError(KbRayError):
    """The server's probe vector differs from the one recorded under the same fingerprint."""


@dataclass(frozen=True)
class ProbeRecord:
    fingerprint: str
    model_id: str
    endpoint: str
    dim: int
    digest: str  # sha256 of the float32 vector rounded to 4 decimals: equal digests, equal vectors
    vector: list[float]
    recorded_at: float


def vector_digest(vector: np.ndarray) -> str:
    rounded = np.round(np.asarray(vector, dtype=np.float64), 4).astype(np.float32)
    return hashlib.sha256(rounded.tobytes()).hexdigest()[:16]


def probe_path(cache_dir: str | Path | None, fingerprint: str) -> Path:
    from kb_ray.embedding.onnx_export import default_cache_dir

    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    return root / PROBE_DIR / f"{fingerprint}.json"


def verify_probe(vector: np.ndarray, *, fingerprint: str, model_id: str, endpoint: str,
                 cache_dir: str | Path | None) -> ProbeRecord:
    """Check ``vector`` (the probe text's) against the record of ``fingerprint``; record it when
    there is none. Raises :class:`ProbeMismatchError` when they differ beyond the tolerance."""
    vector = np.asarray(vector, dtype=np.float32)
    path = probe_path(cache_dir, fingerprint)
    seen = ProbeRecord(fingerprint=fingerprint, model_id=model_id, endpoint=endpoint, dim=int(vector.shape[0]),
                       digest=vector_digest(vector), vector=[float(x) for x in vector], recorded_at=time.time())
    if not path.is_file():
        _write(path, seen)
        logger.info("recorded the probe vector of %s (%s, digest %s) in %s", model_id, fingerprint, seen.digest, path)
        return seen
    recorded = _read(path)
    problem = probe_difference(np.asarray(recorded.vector, dtype=np.float32), vector)
    if problem:
        raise ProbeMismatchError(
            f"the embedding server at {endpoint} serves {model_id!r} with other vectors than when fingerprint "
            f"{fingerprint} was recorded (from {recorded.endpoint} at {time.ctime(recorded.recorded_at)}): {problem}. "
            "The model behind that name changed, and its vectors must not be mixed with the catalog's. Point "
            "embedding.endpoint at the original model, or give the new one its own embedding.model_id (a new "
            f"fingerprint; embedding.allow_model_switch to re-embed); delete {path} only if the old vectors are gone")
    return recorded


def probe_difference(recorded: np.ndarray, seen: np.ndarray) -> str | None:
    """Why two probe vectors are not the same vector space, or None when they are."""
    if recorded.shape != seen.shape:
        return f"the probe vector has {seen.shape[0]} dimensions, the record {recorded.shape[0]}"
    norms = float(np.linalg.norm(recorded)), float(np.linalg.norm(seen))
    if min(norms) == 0.0:
        return "a probe vector is all zeros"
    cos_gap = abs(float(np.dot(recorded, seen)) / (norms[0] * norms[1]) - 1.0)
    if cos_gap > PROBE_TOLERANCE:
        return f"|cos - 1| = {cos_gap:.2e} > tolerance {PROBE_TOLERANCE:g}"
    norm_gap = abs(norms[1] / norms[0] - 1.0)
    if norm_gap > PROBE_TOLERANCE:
        return f"the vector's length changed by {norm_gap:.2e} > tolerance {PROBE_TOLERANCE:g}"
    return None


def _read(path: Path) -> ProbeRecord:
    try:
        return ProbeRecord(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise KbRayError(f"the probe record {path} is unreadable ({exc}); delete it to record the probe again") from exc


def _write(path: Path, record: ProbeRecord) -> None:
    """Atomically (a temporary file renamed into place), so a reader never sees half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".probe-", suffix=".json")
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(record), handle)
    os.replace(tmp, path)
