"""jobs/: each entry point answers --help, and verify/purge run on a small synthetic catalog."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.index_fixtures import REPO, synthetic_docs, write_synthetic_catalog

JOBS = ["ingest", "build_index", "verify", "purge", "maintain", "eval"]


def run_job(name: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", f"jobs.{name}", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", JOBS)
def test_help(name):
    result = run_job(name, "--help")
    assert result.returncode == 0, result.stderr
    assert "--config" in result.stdout and "--set" in result.stdout


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("jobs") / "kb"
    write_synthetic_catalog(root, synthetic_docs(6))
    return str(root)


def test_verify_then_purge_then_verify(small_kb):
    verify = run_job("verify", "--set", f"kb_root={small_kb}")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "catalog verify: OK" in verify.stdout
    purge = run_job("purge", "--set", f"kb_root={small_kb}", "--superseded")
    assert purge.returncode == 0, purge.stdout + purge.stderr
    assert purge.stdout.startswith("purged ")
    assert run_job("verify", "--set", f"kb_root={small_kb}", "--strict").returncode == 0


def test_kb_ray_error_exits_nonzero_with_one_line(tmp_path):
    result = run_job("verify", "--config", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith("python -m jobs.verify: error: config file")


def test_bench_names_its_scripts():
    result = subprocess.run([sys.executable, "-m", "jobs.bench"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and "ingest" in result.stderr


def test_bench_help_lists_every_benchmark_script():
    result = subprocess.run([sys.executable, "-m", "jobs.bench", "--help"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")}
    scripts = {path.stem for path in (REPO / "benchmarks").glob("*.py") if not path.stem.startswith("_")}
    assert scripts <= listed and "gpu_parse" in listed
