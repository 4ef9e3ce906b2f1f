"""Validate Kubernetes manifests offline against a CustomResourceDefinition's schema.

``kubectl apply --validate=strict`` rejects a custom resource whose fields the CRD does not
declare. This module does the same without a cluster: it turns the CRD's
``openAPIV3Schema`` into a JSON Schema (Draft 4, which OpenAPI v3.0 schemas follow) and
validates with :mod:`jsonschema`:

* an object schema with ``properties``, no ``additionalProperties`` and no
  ``x-kubernetes-preserve-unknown-fields: true`` gets ``additionalProperties: false``, so an
  unknown field is an error (as the API server's strict field validation reports it);
* ``x-kubernetes-int-or-string: true`` accepts an integer or a string;
* ``x-kubernetes-embedded-resource: true`` allows (and checks) ``apiVersion``, ``kind`` and
  ``metadata`` in the embedded object;
* ``nullable: true`` also accepts ``null``;
* the top-level ``metadata`` (free-form in every CRD schema) is checked as an ObjectMeta:
  known keys only, a DNS-1123 ``name``, string labels and annotations; ``apiVersion`` must be
  ``<group>/<version>`` and ``kind`` the CRD's kind.

Not checked: CEL rules (``x-kubernetes-validations``), list-map key uniqueness, ``format``
and what the operator itself validates at admission or reconcile time.

    crd = load_crd("../shared/k8s-crds/ray.io_rayjobs.yaml")
    errors = validate_manifest(yaml.safe_load(text), crd)   # [] when valid
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_JUNCTORS = ("allOf", "anyOf", "oneOf")
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
OBJECT_META: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": DNS1123_SUBDOMAIN},
        "generateName": {"type": "string"},
        "namespace": {"type": "string", "maxLength": 63, "pattern": DNS1123_SUBDOMAIN},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {"type": "object"}},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "creationTimestamp": {"type": ["string", "null"]},
        "deletionTimestamp": {"type": ["string", "null"]},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "managedFields": {"type": "array", "items": {"type": "object"}},
        "selfLink": {"type": "string"},
    },
}


def load_crd(path: str | Path) -> dict[str, Any]:
    """Read one CustomResourceDefinition YAML file."""
    crd = yaml.load(Path(path).read_text(), Loader=_YAML_LOADER)  # CRDs are MBs: libyaml if present
    if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
        raise ValueError(f"{path} is not a CustomResourceDefinition")
    return crd


def load_crds(directory: str | Path) -> dict[str, dict[str, Any]]:
    """Every CRD in ``directory`` (``*.yaml``), keyed by the kind it defines."""
    crds = (load_crd(path) for path in sorted(Path(directory).glob("*.yaml")))
    return {crd["spec"]["names"]["kind"]: crd for crd in crds}


def crd_schema(crd: Mapping[str, Any], version: str = "v1") -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``version`` in ``crd``."""
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            return entry["schema"]["openAPIV3Schema"]
    names = [entry["name"] for entry in crd["spec"]["versions"]]
    raise ValueError(f"CRD {crd['metadata']['name']} has no version {version!r} (has {names})")


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema (Draft 4) that rejects the fields ``schema`` does not declare."""
    return _strict(schema, in_junctor=False)


def _strict(node: Mapping[str, Any], *, in_junctor: bool) -> dict[str, Any]:
    out: dict[str, Any] = {key: value for key, value in node.items() if not key.startswith("x-kubernetes-")}
    out.pop("default", None)
    if "properties" in node:
        out["properties"] = {name: _strict(sub, in_junctor=False) for name, sub in node["properties"].items()}
    if isinstance(node.get("additionalProperties"), Mapping):
        out["additionalProperties"] = _strict(node["additionalProperties"], in_junctor=False)
    if isinstance(node.get("items"), Mapping):
        out["items"] = _strict(node["items"], in_junctor=False)
    for junctor in _JUNCTORS:
        if junctor in node:
            out[junctor] = [_strict(sub, in_junctor=True) for sub in node[junctor]]
    if "not" in node:
        out["not"] = _strict(node["not"], in_junctor=True)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("x-kubernetes-embedded-resource"):
        _allow_embedded_resource_fields(out)
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
    out.pop("nullable", None)
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if "properties" in out and "additionalProperties" not in node and not preserve and not in_junctor:
        out["additionalProperties"] = False
    return out


def _allow_embedded_resource_fields(out: dict[str, Any]) -> None:
    properties = out.setdefault("properties", {})
    properties.setdefault("apiVersion", {"type": "string"})
    properties.setdefault("kind", {"type": "string"})
    if properties.get("metadata", {}).keys() <= {"type"}:
        properties["metadata"] = OBJECT_META
    out["required"] = sorted({*out.get("required", []), "apiVersion", "kind"})


def manifest_schema(crd: Mapping[str, Any], version: str = "v1") -> dict[str, Any]:
    """The strict schema of a whole custom resource: the CRD's schema plus apiVersion, kind
    and ObjectMeta checks (a CRD leaves the top-level ``metadata`` free-form)."""
    schema = strict_schema(crd_schema(crd, version))
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"enum": [f"{crd['spec']['group']}/{version}"]}
    properties["kind"] = {"enum": [crd["spec"]["names"]["kind"]]}
    properties["metadata"] = {**OBJECT_META, "required": ["name"]}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    schema["additionalProperties"] = False
    return schema


def validate_manifest(manifest: Any, crd: Mapping[str, Any], *, version: str = "v1") -> list[str]:
    """Readable errors (``$.spec.field: message``) of ``manifest`` against ``crd``; ``[]`` if valid."""
    validator = jsonschema.Draft4Validator(manifest_schema(crd, version))
    errors = sorted(validator.iter_errors(manifest), key=lambda error: [str(p) for p in error.absolute_path])
    return [message for error in errors for message in _messages(error)]


def _messages(error: jsonschema.ValidationError) -> Iterable[str]:
    path = json_path(error.absolute_path)
    if error.validator == "additionalProperties" and error.validator_value is False:
        declared = error.schema.get("properties", {})
        for key in sorted(set(error.instance) - set(declared)):
            yield f'{json_path([*error.absolute_path, key])}: unknown field "{key}"'
        return
    yield f"{path}: {error.message}"


def json_path(parts: Iterable[Any]) -> str:
    """``$.spec.containers[0].name`` from a jsonschema path deque."""
    text = "$"
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", str(part)):
            text += f".{part}"
        else:
            text += f"[{str(part)!r}]"
    return text
