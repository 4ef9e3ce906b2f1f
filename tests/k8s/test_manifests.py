"""k8s/ manifests: strict validation against the KubeRay CRDs, and every file, module and
config they reference exists in this repository; conf/cluster.yaml loads and fits the pods.

The CRDs come from ``$KB_RAY_K8S_CRDS`` or ``../shared/k8s-crds/`` next to the repository
root; the CRD-dependent tests skip when neither holds them.
"""

from __future__ import annotations

import copy
import os
import shlex
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from kb_ray.config import load_config
from tests.k8s.core_validation import validate_core
from tests.k8s.crd_validation import load_crds, validate_manifest

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((REPO / "k8s").glob("*.yaml"))
KINDS = {"RayCluster", "RayJob", "RayService"}
CORE_KINDS = {"CronJob", "ServiceAccount", "Role", "RoleBinding"}  # checked with the kubernetes client's models
SECRET_ENV = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}


def _crd_dir() -> Path | None:
    candidates = [os.environ.get("KB_RAY_K8S_CRDS"), REPO.parent / "shared" / "k8s-crds"]
    for candidate in filter(None, candidates):
        if Path(candidate, "ray.io_rayjobs.yaml").is_file():
            return Path(candidate)
    return None


@pytest.fixture(scope="module")
def crds() -> dict:
    directory = _crd_dir()
    if directory is None:
        pytest.skip("KubeRay CRDs not found: set KB_RAY_K8S_CRDS to a directory of ray.io_*.yaml "
                    "or provide ../shared/k8s-crds/ next to the repository")
    found = load_crds(directory)
    assert KINDS <= found.keys(), f"{directory} lacks CRDs for {KINDS - found.keys()}"
    return found


def _documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _all_documents() -> list[tuple[str, dict]]:
    return [(f"{path.name}:{i}", doc) for path in MANIFESTS for i, doc in enumerate(_documents(path))]


def _cluster_spec(manifest: dict) -> dict:
    spec = manifest["spec"]
    return {"RayCluster": spec, "RayJob": spec.get("rayClusterSpec"),
            "RayService": spec.get("rayClusterConfig")}[manifest["kind"]] or {}


def _pod_specs(manifest: dict) -> list[dict]:
    cluster = _cluster_spec(manifest)
    groups = [cluster.get("headGroupSpec", {}), *cluster.get("workerGroupSpecs", [])]
    return [group["template"]["spec"] for group in groups if "template" in group]


def _containers(manifest: dict) -> list[dict]:
    return [container for pod in _pod_specs(manifest) for container in pod.get("containers", [])]


def _serve_config(manifest: dict) -> dict:
    return yaml.safe_load(manifest["spec"]["serveConfigV2"])


ALL_DOCUMENTS = _all_documents()
DOCUMENTS = [(name, doc) for name, doc in ALL_DOCUMENTS if doc["kind"] in KINDS]
IDS = [name for name, _ in DOCUMENTS]
CORE_DOCUMENTS = [(name, doc) for name, doc in ALL_DOCUMENTS if doc["kind"] not in KINDS]


def test_manifests_exist():
    kinds = {doc["kind"] for _, doc in ALL_DOCUMENTS}
    assert kinds == KINDS | CORE_KINDS, f"k8s/ should hold KubeRay resources and the ingest schedule, has {kinds}"


# --- core objects (the scheduled ingest): strict validation against the Kubernetes API models ---

@pytest.mark.parametrize(("name", "manifest"), CORE_DOCUMENTS, ids=[name for name, _ in CORE_DOCUMENTS])
def test_core_objects_validate_strictly(name, manifest):
    assert validate_core(manifest) == [], name


def test_core_validation_finds_unknown_fields_and_wrong_types():
    cronjob = copy.deepcopy(_cronjob())
    cronjob["spec"]["concurency"] = "Forbid"
    cronjob["spec"]["startingDeadlineSeconds"] = "1h"
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    assert sorted(validate_core(cronjob)) == [
        '$.spec.concurency: unknown field "concurency"',
        "$.spec.jobTemplate.spec.template.spec.containers[0].imagePullPolicyy: unknown field \"imagePullPolicyy\"",
        "$.spec.startingDeadlineSeconds: expected int, got str"]
    assert validate_core({**cronjob, "apiVersion": "batch/v9"})[0].startswith("$: no Kubernetes API model V9CronJob")


def _cronjob() -> dict:
    return next(doc for _, doc in CORE_DOCUMENTS if doc["kind"] == "CronJob")


def test_the_schedule_submits_the_ingest_rayjob_one_run_at_a_time():
    spec = _cronjob()["spec"]
    assert len(spec["schedule"].split()) == 5 and spec["concurrencyPolicy"] == "Forbid"
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    script = pod["containers"][0]["args"][0]
    rayjob = next(doc for name, doc in DOCUMENTS if name.startswith("rayjob-ingest.yaml"))
    assert "kubectl create -f /manifests/rayjob.yaml" in script
    assert f"rayjob {rayjob['metadata']['name']}" in script  # deletes and waits for the RayJob it creates
    volume = pod["volumes"][0]["configMap"]
    assert volume["items"] == [{"key": "rayjob.yaml", "path": "rayjob.yaml"}]
    header = (REPO / "k8s" / "cronjob-ingest.yaml").read_text()
    assert f"kubectl create configmap {volume['name']} --from-file=rayjob.yaml=k8s/rayjob-ingest.yaml" in header
    role = next(doc for _, doc in CORE_DOCUMENTS if doc["kind"] == "Role")
    binding = next(doc for _, doc in CORE_DOCUMENTS if doc["kind"] == "RoleBinding")
    assert role["rules"] == [{"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["get", "create", "delete"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]


# --- strict validation against the CRDs ---------------------------------------------------

@pytest.mark.parametrize(("name", "manifest"), DOCUMENTS, ids=IDS)
def test_validates_strictly_against_its_crd(crds, name, manifest):
    assert manifest["kind"] in crds, f"{name}: no CRD for kind {manifest['kind']}"
    assert validate_manifest(manifest, crds[manifest["kind"]]) == []


@pytest.mark.parametrize(("name", "manifest"), DOCUMENTS, ids=IDS)
def test_unknown_fields_fail_validation(crds, name, manifest):
    broken = copy.deepcopy(manifest)
    broken["spec"]["replicaCount"] = 3
    _containers(broken)[0]["imagePullPolicyy"] = "Always"
    errors = validate_manifest(broken, crds[manifest["kind"]])
    assert '$.spec.replicaCount: unknown field "replicaCount"' in errors
    assert any(e.endswith('.containers[0].imagePullPolicyy: unknown field "imagePullPolicyy"') for e in errors)
    assert len(errors) == 2, errors


def test_wrong_types_and_identity_fail_validation(crds):
    _, manifest = next(item for item in DOCUMENTS if item[1]["kind"] == "RayJob")
    broken = copy.deepcopy(manifest)
    broken["apiVersion"] = "ray.io/v1alpha2"
    broken["metadata"]["name"] = "Not_A_DNS_Name"
    broken["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0  # must be a string
    paths = [error.split(":")[0] for error in validate_manifest(broken, crds["RayJob"])]
    assert paths == ["$.apiVersion", "$.metadata.name", "$.spec.rayClusterSpec.headGroupSpec.rayStartParams.num-cpus"]


# --- what the manifests reference exists ------------------------------------------------

def _module_file(module: str) -> Path | None:
    base = REPO / module.replace(".", "/")
    return next((path for path in (base.with_suffix(".py"), base / "__init__.py") if path.is_file()), None)


def _check_config(path: str, where: str) -> None:
    config_file = REPO / path
    assert config_file.is_file(), f"{where}: {path} does not exist"
    load_config(config_file)


@pytest.mark.parametrize(("name", "manifest"), [d for d in DOCUMENTS if d[1]["kind"] == "RayJob"],
                         ids=[n for n, d in DOCUMENTS if d["kind"] == "RayJob"])
def test_rayjob_entrypoint_references_exist(name, manifest):
    argv = shlex.split(manifest["spec"]["entrypoint"])
    assert argv[:2] == ["python", "-m"] and argv[2].startswith("jobs."), f"{name}: {argv}"
    assert _module_file(argv[2]), f"{name}: module {argv[2]} has no file in the repository"
    assert "--config" in argv, f"{name}: the entrypoint names no --config"
    _check_config(argv[argv.index("--config") + 1], name)


@pytest.mark.parametrize(("name", "manifest"), DOCUMENTS, ids=IDS)
def test_container_env_configs_exist(name, manifest):
    for container in _containers(manifest):
        for env in container.get("env", []):
            if env["name"] == "KB_RAY_CONFIG":
                _check_config(env["value"], f"{name} {container['name']}")


def test_rayservice_serve_config_references_exist():
    for name, manifest in DOCUMENTS:
        if manifest["kind"] != "RayService":
            continue
        for app in _serve_config(manifest)["applications"]:
            module = app["import_path"].partition(":")[0]
            assert _module_file(module), f"{name}: import_path module {module} has no file"
            config = app.get("runtime_env", {}).get("env_vars", {}).get("KB_RAY_CONFIG")
            if config:
                _check_config(config, f"{name} {app['name']}")


def test_rayservice_embeds_serve_config_verbatim():
    serve_config = REPO / "serve" / "config.yaml"
    if not serve_config.is_file():
        pytest.skip("serve/config.yaml does not exist yet: nothing to compare serveConfigV2 with")
    expected = yaml.safe_load(serve_config.read_text())
    for name, manifest in DOCUMENTS:
        if manifest["kind"] == "RayService":
            assert _serve_config(manifest) == expected, f"{name}: serveConfigV2 differs from serve/config.yaml"


# --- cluster settings the README promises ----------------------------------------------

@pytest.mark.parametrize(("name", "manifest"), DOCUMENTS, ids=IDS)
def test_ray_version_matches_installed_ray(name, manifest):
    try:
        installed = metadata.version("ray")
    except metadata.PackageNotFoundError:
        pytest.skip("ray is not installed")
    assert _cluster_spec(manifest)["rayVersion"] == installed


@pytest.mark.parametrize(("name", "manifest"), DOCUMENTS, ids=IDS)
def test_credentials_only_from_secrets(name, manifest):
    for container in _containers(manifest):
        for env in container.get("env", []):
            if env["name"] in SECRET_ENV:
                assert "value" not in env and "secretKeyRef" in env["valueFrom"], f"{name}: {env['name']}"
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" not in yaml.safe_dump(manifest)


def test_lifecycle_fields():
    for name, manifest in DOCUMENTS:
        spec = manifest["spec"]
        if manifest["kind"] == "RayJob":
            assert spec["shutdownAfterJobFinishes"] is True, name
            assert spec["ttlSecondsAfterFinished"] >= 0 and spec["backoffLimit"] >= 0, name
        if manifest["kind"] == "RayService":
            assert spec["upgradeStrategy"]["type"] == "NewCluster", name
        if manifest["kind"] == "RayCluster":
            assert spec["enableInTreeAutoscaling"] is True and "autoscalerOptions" in spec, name
            for group in spec["workerGroupSpecs"]:
                assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], name


# --- conf/cluster.yaml ------------------------------------------------------------------

def _quantity(value) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def _ray_resources(manifest: dict) -> tuple[float, float]:
    """CPUs and GPUs the Ray cluster of ``manifest`` offers for tasks and actors."""
    cluster = _cluster_spec(manifest)
    cpus = gpus = 0.0
    for group in [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]:
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        count = group.get("replicas", 1)
        cpus += count * _quantity(group.get("rayStartParams", {}).get("num-cpus", limits["cpu"]))
        gpus += count * _quantity(limits.get("nvidia.com/gpu", 0))
    return cpus, gpus


def test_cluster_config_loads():
    config = load_config(REPO / "conf" / "cluster.yaml")
    assert config.kb_root.startswith("s3://")
    assert all(source.startswith("s3://") for source in config.ingest.sources)
    assert not SECRET_ENV & config.storage_options.keys()
    assert "AWS_S3_ALLOW_UNSAFE_RENAME" not in {key.upper() for key in config.storage_options}
    assert config.embedding.device == "cuda" and 0 < config.ray.embed.num_gpus < 1


def test_cluster_config_fits_the_ingest_job():
    config = load_config(REPO / "conf" / "cluster.yaml")
    (manifest,) = [doc for _, doc in DOCUMENTS if doc["metadata"]["name"] == "kb-ray-ingest"]
    cpus, gpus = _ray_resources(manifest)
    stages = [config.ray.parse, config.ray.embed]
    assert sum(s.concurrency * s.num_cpus for s in stages) <= cpus
    assert sum(s.concurrency * s.num_gpus for s in stages) <= gpus


# --- the validator on a small CRD (no shared files needed) ------------------------------

TOY_CRD = {
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "toys.example.com"},
    "spec": {"group": "example.com", "names": {"kind": "Toy"}, "versions": [{"name": "v1", "schema": {
        "openAPIV3Schema": {"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer"},
                "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "params": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                         "properties": {"known": {"type": "string"}}},
                "inner": {"type": "object", "x-kubernetes-embedded-resource": True,
                          "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "note": {"type": "string", "nullable": True},
            }},
        }}}}]},
}


def _toy(**spec) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Toy", "metadata": {"name": "t"}, "spec": {"size": 1, **spec}}


def test_validator_accepts_kubernetes_extensions():
    toy = _toy(port="http", params={"a": "1"}, free={"known": "x", "anything": [1]}, note=None,
               inner={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "spec": {"a": "b"}})
    assert validate_manifest(toy, TOY_CRD) == []
    assert validate_manifest(_toy(port=8080), TOY_CRD) == []


@pytest.mark.parametrize(("spec", "error"), [
    ({"extra": 1}, '$.spec.extra: unknown field "extra"'),
    ({"port": True}, "$.spec.port: True is not valid under any of the given schemas"),
    ({"params": {"a": 1}}, "$.spec.params.a: 1 is not of type 'string'"),
    ({"free": {"known": 2}}, "$.spec.free.known: 2 is not of type 'string'"),
    ({"inner": {"apiVersion": "v1", "kind": "X", "spec": {"b": 1}}}, '$.spec.inner.spec.b: unknown field "b"'),
    ({"inner": {"spec": {}}}, "$.spec.inner: 'apiVersion' is a required property"),
])
def test_validator_reports_errors_with_paths(spec, error):
    assert error in validate_manifest(_toy(**spec), TOY_CRD)


def test_validator_checks_identity_and_metadata():
    toy = _toy()
    toy.update(kind="Robot", extra=1)
    toy["metadata"] = {"labels": {"a": 1}}
    assert validate_manifest(toy, TOY_CRD) == [
        '$.extra: unknown field "extra"',
        "$.kind: 'Robot' is not one of ['Toy']",
        "$.metadata: 'name' is a required property",
        "$.metadata.labels.a: 1 is not of type 'string'",
    ]
