"""serve/config.yaml: parses, names real deployments, points at a real module, and passes
Ray Serve's own ``ServeDeploySchema`` (what ``serve deploy`` validates before sending)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml

from kb_ray.config import load_config

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "serve" / "config.yaml"
DEPLOYMENT_CLASSES = {"SearchIngress", "QueryEmbedder", "ShardSearcher", "RerankerDeployment"}


@pytest.fixture(scope="module")
def serve_config() -> dict:
    return yaml.safe_load(CONFIG.read_text())


@pytest.fixture(scope="module")
def application(serve_config) -> dict:
    (app,) = serve_config["applications"]
    return app


def test_application_shape(serve_config, application):
    assert serve_config["http_options"] == {"host": "0.0.0.0", "port": 8000}  # a cluster file (k8s/)
    assert application["name"] == "kb-ray" and application["route_prefix"] == "/"
    assert application["import_path"] == "serve.app:app"
    env = application["runtime_env"]["env_vars"]
    assert env["HF_HUB_OFFLINE"] == "1" and (REPO / env["KB_RAY_CONFIG"]).is_file()


def test_deployment_names_are_deployment_classes(application):
    from ray.serve import Deployment

    from kb_ray.serving import deployments

    classes = {name for name, obj in inspect.getmembers(deployments) if isinstance(obj, Deployment)}
    assert DEPLOYMENT_CLASSES <= classes
    names = [entry["name"] for entry in application["deployments"]]
    assert names and set(names) <= classes


def test_listed_deployments_are_built_by_the_app(application):
    """Serve refuses an override for a deployment the app does not build, so every entry must
    be bound by build_app for the config the YAML names (RerankerDeployment only with a
    rerank model)."""
    from ray.serve import Application

    from kb_ray.serving.app import build_app

    config = load_config(REPO / application["runtime_env"]["env_vars"]["KB_RAY_CONFIG"])
    built, todo = set(), [build_app(config)]
    while todo:
        deployment = todo.pop()._bound_deployment
        built.add(deployment.name)
        todo += [a for a in [*deployment.init_args, *deployment.init_kwargs.values()] if isinstance(a, Application)]
    assert {entry["name"] for entry in application["deployments"]} <= built


def test_import_path_module_exists(application):
    module, _, attribute = application["import_path"].partition(":")
    source = REPO / (module.replace(".", "/") + ".py")
    assert source.is_file()
    assert f"{attribute} = " in source.read_text()


def test_validates_against_ray_serve_schema(serve_config):
    from ray.serve.schema import ServeDeploySchema

    validate = getattr(ServeDeploySchema, "model_validate", None) or ServeDeploySchema.parse_obj
    schema = validate(serve_config)
    assert [app.name for app in schema.applications] == ["kb-ray"]
    assert schema.http_options.host == "0.0.0.0"
