"""``kb-ray dev tiny-models`` + ``kb-ray ingest --config conf/tiny.yaml`` on golden/: every
stage, figure captions by the tiny VLM included, through the CLI on a real local Ray."""

from __future__ import annotations

import json

import pytest

from kb_ray.cli import main
from kb_ray.cli.dev_command import TINY_MODELS
from tests.conftest import REPO_ROOT
from tests.ingest.helpers import catalog

pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.mark.slow  # every tiny model through the CLI, ~30 s; CI runs it (make test-cluster)
def test_tiny_config_ingests_golden_with_captions(tmp_path, capsys):
    models = tmp_path / "models"
    assert main(["dev", "tiny-models", "--out", str(models)]) == 0
    assert all((models / name).is_dir() for name in TINY_MODELS)
    overrides = [f"kb_root={tmp_path / 'kb'}", f"embedding.model_path={models / 'text-tiny'}",
                 f"pages.model_path={models / 'colqwen2-tiny'}", f"enrich.captions.model_path={models / 'vlm-tiny'}",
                 f"search.rerank_model_path={models / 'reranker-tiny'}"]
    args = ["--config", str(REPO_ROOT / "conf" / "tiny.yaml")] + [part for o in overrides for part in ("--set", o)]
    capsys.readouterr()
    assert main(["ingest", "--json", *args]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["captions"]["computed"] >= 1 and report["captions"]["failed"] == 0

    figures = [json.loads(row["attrs_json"]) for row in catalog(tmp_path / "kb").read("elements").to_pylist()
               if row["kind"] == "figure"]
    crops = {attrs["crop_sha"] for attrs in figures if attrs.get("crop_sha")}
    enrichments = catalog(tmp_path / "kb").read("enrichments").to_pylist()
    assert crops and {row["input_sha"] for row in enrichments} == crops
    assert all(row["status"] == "ok" and row["model"] == "kb-ray/tiny-vlm" and row["completion_tokens"] > 0
               for row in enrichments)
    descriptions = [row for row in catalog(tmp_path / "kb").read("chunks").to_pylist()
                    if row["kind"] == "figure_description"]
    assert len(descriptions) == len(crops)
    assert main(["verify", "--strict", *args]) == 0
