"""Embedding settings: the embed stage's batch is the micro-batch; the shipped configs load."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_ray.config import load_config
from kb_ray.errors import ConfigError

CONF = Path(__file__).resolve().parents[2] / "conf"


def test_ray_embed_batch_size_that_would_not_be_read_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"ray.embed.batch_size=64 is not read.*micro_batch_docs=16"):
        load_config(CONF / "local.yaml", overrides=["ray.embed.batch_size=64"])
    same = load_config(CONF / "local.yaml", overrides=["ray.embed.batch_size=16"])  # restates micro_batch_docs
    assert same.ray.embed.batch_size == same.ingest.micro_batch_docs == 16


def test_other_stages_keep_a_batch_size() -> None:
    with pytest.raises(ConfigError, match="ray.parse.batch_size must be set"):
        load_config(overrides=["ray.parse.batch_size=null"])


@pytest.mark.parametrize("name", ["local.yaml", "tiny.yaml", "cluster.yaml"])
def test_shipped_configs_leave_the_embed_batch_to_the_micro_batch(name: str) -> None:
    config = load_config(CONF / name)
    assert config.ray.embed.batch_size is None
    assert config.embedding.batch_size >= 1


def test_embedding_paths_resolve_against_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("embedding:\n  runtime: onnx\n  cache_dir: cache/onnx\n")
    config = load_config(tmp_path / "c.yaml")
    assert config.embedding.runtime == "onnx"
    assert config.embedding.cache_dir == str(tmp_path / "cache" / "onnx")
