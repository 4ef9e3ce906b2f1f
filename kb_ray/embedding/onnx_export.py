"""Export a saved transformer to ONNX once, into a content-addressed cache directory.

The cache key covers the model files' digest, the runtime (``onnx``, ``onnx-int8``,
``onnx-int8-mixed``), the quantization recipe of an int8 runtime (:data:`QUANT_RECIPES`) and
the versions of everything that shapes the exported graph (torch, onnx, onnxruntime, the
opset, :data:`EXPORT_VERSION`), so a changed model or a library upgrade exports afresh and
never reuses a stale graph. Nothing is downloaded: the graph comes from the local weights.

Steps: ``torch.onnx.export`` of the Hugging Face encoder (outputs the last hidden state;
pooling and normalization run in numpy, :mod:`kb_ray.embedding.onnx_runtime`), then ONNX
Runtime's BERT graph fusion (attention, skip-layer-norm, bias-GeLU) when the model is a
BERT, and for the int8 runtimes dynamic int8 quantization of the fused graph by the
runtime's recipe (``onnxruntime.quantization.quantize_dynamic``). Several actors starting at once on one
node export once: a file lock serializes them and the result appears by an atomic rename.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kb_ray.embedding.model_files import ONNX_INSTALL_HINT
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

EXPORT_VERSION = "2"  # 2: per-channel int8 weights
OPSET = 17
MODEL_FILE = "model.onnx"
MANIFEST_FILE = "export.json"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
_FUSABLE_TYPES = {"bert"}  # model_type values onnxruntime.transformers fuses as "bert"


def default_cache_dir() -> Path:
    """``$KB_RAY_CACHE_DIR/embedders``, else ``~/.cache/kb-ray/embedders``."""
    root = os.environ.get("KB_RAY_CACHE_DIR") or Path.home() / ".cache" / "kb-ray"
    return Path(root).expanduser() / "embedders"


def exported_model(path: Path, *, digest: str, runtime: str, cache_dir: str | Path | None) -> Path:
    """The ONNX file for the model at ``path`` and ``runtime``, exporting it on first use."""
    cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    entry = cache / f"{digest[:16]}-{runtime}-{export_key(digest=digest, runtime=runtime)}"
    if (entry / MODEL_FILE).is_file():
        return entry / MODEL_FILE
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"{entry.name}.lock"):
        if not (entry / MODEL_FILE).is_file():  # another process may have finished meanwhile
            _export_entry(path, entry, runtime=runtime, digest=digest)
    return entry / MODEL_FILE


def export_key(*, digest: str, runtime: str) -> str:
    versions = _exporter_versions()
    recipe = {"quantization": QUANT_RECIPES[runtime].key()} if runtime in QUANT_RECIPES else {}
    payload = json.dumps({"digest": digest, "runtime": runtime, "opset": OPSET, "export": EXPORT_VERSION,
                          **recipe, **versions}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _export_entry(path: Path, entry: Path, *, runtime: str, digest: str) -> None:
    started = time.perf_counter()
    logger.info("exporting %s to ONNX (%s) into %s; done once per model and library versions", path, runtime, entry)
    with tempfile.TemporaryDirectory(dir=entry.parent, prefix=".export-") as tmp:
        work = Path(tmp)
        fused = _fuse_if_bert(path, _torch_export(path, work / "raw.onnx"), work / "fused.onnx")
        target = work / "entry" / MODEL_FILE
        target.parent.mkdir()
        if runtime in QUANT_RECIPES:
            quantize_graph(fused, target, recipe=QUANT_RECIPES[runtime])
        else:
            shutil.move(fused, target)
        manifest = {"model_digest": digest, "runtime": runtime, "opset": OPSET, "export_version": EXPORT_VERSION,
                    "quantization": QUANT_RECIPES[runtime].key() if runtime in QUANT_RECIPES else None,
                    "seconds": round(time.perf_counter() - started, 1), **_exporter_versions()}
        (target.parent / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        os.replace(target.parent, entry)
    logger.info("exported %s in %.1f s", entry / MODEL_FILE, time.perf_counter() - started)


def _torch_export(path: Path, out: Path) -> Path:
    torch, auto_model, auto_tokenizer = _import_exporter()
    inner = auto_model.from_pretrained(str(path), local_files_only=True, attn_implementation="eager")
    model = _last_hidden_state_module(inner).eval()  # eval() on the wrapper too: no dropout in the graph
    tokenizer = auto_tokenizer.from_pretrained(str(path), local_files_only=True)
    sample = tokenizer(["a short text", "a somewhat longer text to export with"], padding=True, return_tensors="pt")
    names = [name for name in INPUT_NAMES if name in sample]
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about Python control flow in transformers
        torch.onnx.export(model, tuple(sample[name] for name in names), str(out), input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET,
                          dynamo=False)
    return out


def _fuse_if_bert(path: Path, raw: Path, out: Path) -> Path:
    config = json.loads((path / "config.json").read_text())
    if config.get("model_type") not in _FUSABLE_TYPES:
        return raw
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(str(raw), model_type="bert", num_heads=int(config["num_attention_heads"]),
                               hidden_size=int(config["hidden_size"]), opt_level=None)
    optimized.save_model_to_file(str(out))
    logger.info("fused %s: %s", path.name, {k: v for k, v in optimized.get_fused_operator_statistics().items() if v})
    return out


@dataclass(frozen=True)
class QuantRecipe:
    """How ``quantize_dynamic`` turns the fused fp32 graph into a dynamic-int8 one.

    ``op_types`` None quantizes every op type onnxruntime can (MatMul, Attention, and the
    embedding tables of EmbedLayerNormalization/Gather); ``keep_float`` lists node-name
    suffixes left in fp32 (e.g. ``"/output/dense/MatMul"``: each layer's FFN down projection).
    """

    op_types: tuple[str, ...] | None = None
    keep_float: tuple[str, ...] = ()
    per_channel: bool = True
    reduce_range: bool = False
    weight_type: str = "QInt8"

    def key(self) -> dict[str, Any]:
        return asdict(self)


# Measured in benchmarks/results/embed.md ("int8 recipes"); a recipe is part of the cache key.
QUANT_RECIPES = {
    "onnx-int8": QuantRecipe(),
    # The embedding tables and each layer's FFN down projection stay fp32: that projection's
    # input (the GELU output) has the outliers that one per-tensor activation scale clips.
    "onnx-int8-mixed": QuantRecipe(op_types=("MatMul", "Attention"), keep_float=(r"layer\.\d+/output/dense/MatMul$",)),
}


def quantize_graph(model: Path, out: Path, *, recipe: QuantRecipe) -> None:
    """Dynamic int8 quantization of ``model`` into ``out`` by ``recipe``."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    names = [node.name for node in onnx.load(str(model), load_external_data=False).graph.node]
    excluded = kept_float_names(names, recipe)
    # Fused ops (Attention, SkipLayerNormalization) are in the com.microsoft domain, where onnx
    # shape inference gives no types: tell the quantizer their outputs are float.
    quantize_dynamic(str(model), str(out), weight_type=getattr(QuantType, recipe.weight_type),
                     per_channel=recipe.per_channel, reduce_range=recipe.reduce_range,
                     op_types_to_quantize=list(recipe.op_types) if recipe.op_types else None,
                     nodes_to_exclude=excluded, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def kept_float_names(names: list[str], recipe: QuantRecipe) -> list[str]:
    """The node names ``recipe`` leaves in fp32."""
    return [name for name in names if any(re.search(pattern, name) for pattern in recipe.keep_float)]


def _last_hidden_state_module(model: Any) -> Any:
    """``model`` wrapped to take positional inputs and return only the last hidden state."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: Any) -> Any:
            return self.inner(**dict(zip(INPUT_NAMES, inputs))).last_hidden_state

    return LastHiddenState(model)


def _import_exporter() -> tuple[Any, Any, Any]:
    try:
        import onnx  # noqa: F401  (torch.onnx and the quantizer need it)
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise KbRayError(f"exporting the embedder to ONNX needs torch, transformers and onnx: {ONNX_INSTALL_HINT}") from exc
    return torch, AutoModel, AutoTokenizer


def _exporter_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("torch", "transformers", "onnx", "onnxruntime", "onnxruntime-gpu"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "absent"
    return found


@contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    with lock_file.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
