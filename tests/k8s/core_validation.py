"""Validate core Kubernetes objects (CronJob, ServiceAccount, Role, …) offline against the API
models of the official ``kubernetes`` Python client: every field must be one the object's
model declares, with the declared type — what ``kubectl apply --validate=strict`` rejects for
an unknown or mistyped field. The KubeRay custom resources are checked against their CRDs by
tests/k8s/crd_validation.py instead.

    errors = validate_core(yaml.safe_load(text))   # [] when valid
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

_PRIMITIVES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,),
                                            "datetime": (str,), "date": (str,)}


def model_name(manifest: dict) -> str:
    """``batch/v1`` + ``CronJob`` → ``V1CronJob`` (the client's class name)."""
    version = str(manifest.get("apiVersion", "")).rsplit("/", 1)[-1]
    return version[:1].upper() + version[1:] + str(manifest.get("kind", ""))


def validate_core(manifest: dict) -> list[str]:
    name = model_name(manifest)
    if not hasattr(client, name):
        return [f"$: no Kubernetes API model {name} for apiVersion {manifest.get('apiVersion')!r}, "
                f"kind {manifest.get('kind')!r}"]
    return _check(manifest, name, "$")


def _check(value: Any, type_name: str, path: str) -> list[str]:
    if type_name.startswith("list["):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        return [e for i, item in enumerate(value) for e in _check(item, type_name[5:-1], f"{path}[{i}]")]
    if type_name.startswith(("dict(", "dict[")):  # "dict(str, str)" or "dict[str, str]"
        if not isinstance(value, dict):
            return [f"{path}: expected a map, got {type(value).__name__}"]
        inner = type_name[type_name.index(",") + 1:-1].strip()
        return [e for key, item in value.items() for e in _check(item, inner, f"{path}.{key}")]
    if type_name == "object":  # IntOrString, RawExtension: anything goes
        return []
    if type_name in _PRIMITIVES:
        wanted = _PRIMITIVES[type_name]
        if isinstance(value, bool) and bool not in wanted or not isinstance(value, wanted):
            return [f"{path}: expected {type_name}, got {type(value).__name__}"]
        return []
    return _check_model(value, getattr(client, type_name), path)


def _check_model(value: Any, model: type, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object, got {type(value).__name__}"]
    fields = {json_name: attribute for attribute, json_name in model.attribute_map.items()}
    errors = []
    for key, item in value.items():
        if key not in fields:
            errors.append(f'{path}.{key}: unknown field "{key}"')
        else:
            errors += _check(item, model.openapi_types[fields[key]], f"{path}.{key}")
    return errors
