from pathlib import Path

import pytest

from kb_ray.config import load_config
from kb_ray.errors import ConfigError


def test_defaults_load_without_a_file():
    config = load_config()
    assert config.chunking.strategy == "structural"


def test_relative_paths_resolve_against_the_config_file(tmp_path: Path):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "x.yaml").write_text("kb_root: ../data/kb\ningest:\n  sources: [../docs]\n")
    config = load_config(conf_dir / "x.yaml")
    assert config.kb_root == str(tmp_path / "data" / "kb")
    assert config.ingest.sources == [str(tmp_path / "docs")]


def test_uris_are_left_alone(tmp_path: Path):
    config = load_config(overrides=["kb_root=s3://bucket/kb"])
    assert config.kb_root == "s3://bucket/kb"


def test_partial_override_keeps_the_section_defaults():
    config = load_config(overrides=["ray.parse.batch_size=16"])
    assert config.ray.parse.batch_size == 16
    assert config.ray.parse.num_cpus == 1.0


def test_unknown_keys_are_refused(tmp_path: Path):
    (tmp_path / "bad.yaml").write_text("chunking:\n  max_tokenz: 10\n")
    with pytest.raises(ConfigError, match="max_tokenz"):
        load_config(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="key=value"):
        load_config(overrides=["nonsense"])


def test_the_shipped_local_config_is_valid():
    root = Path(__file__).resolve().parents[1]
    config = load_config(root / "conf" / "local.yaml")
    assert config.kb_root == str(root / ".kb")


def test_storage_options_are_strings_even_when_yaml_reads_a_bool():
    config = load_config(overrides=["storage_options.AWS_ALLOW_HTTP=true", "storage_options.PORT=9000"])
    assert config.storage_options == {"AWS_ALLOW_HTTP": "true", "PORT": "9000"}


def test_home_in_a_config_path_expands():
    config = load_config(None, overrides=["parse.docling.artifacts_path=~/models/docling",
                                          "enrich.captions.model_path=~/models/vlm"])
    assert config.parse.docling.artifacts_path == str(Path.home() / "models" / "docling")
    assert config.enrich.captions.model_path == str(Path.home() / "models" / "vlm")
