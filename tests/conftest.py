"""Shared fixtures: one local Ray instance per test session, offline model hubs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
# S3 tests talk to a local moto server (tests/cluster). Fixed test credentials are set
# before any Ray instance starts, so its workers inherit them too; they also keep a
# developer's real AWS keys away from every test.
TEST_AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_EC2_METADATA_DISABLED": "true"}
os.environ.update(TEST_AWS_ENV)
os.environ.pop("AWS_SESSION_TOKEN", None)
# Ray starts its workers (every Serve replica, every Ray Data actor) at nice 15 (raylet's
# worker_niceness). Under pytest-xdist (`make test`) the other worker is a nice-0 process keeping a
# core busy, and niced replicas starved by it let Serve tests time out; at 0 they share the CPU
# fairly (#41: two workers had 1 to 4 Serve tests failing, none with this). Serial runs keep Ray's default.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("RAY_worker_niceness", "0")

REPO_ROOT = Path(__file__).resolve().parents[1]
GOLDEN_SOURCES = REPO_ROOT / "golden" / "sources"


@pytest.fixture(scope="session")
def ray_session():
    """A small local Ray instance shared by every test that needs one; shut down at the end.

    Code under test calls ``start_ray``, which reuses an initialized instance."""
    import ray

    from kb_ray.runtime import WORKER_ENV

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {**WORKER_ENV, **TEST_AWS_ENV}})
    yield ray
    ray.shutdown()
