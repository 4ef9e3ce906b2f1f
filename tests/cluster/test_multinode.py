"""Two Ray nodes started with ``ray start``; the ingest and index jobs go through ``ray job submit``.

The head runs no Ray work (``--num-cpus=0``, as in ``conf/cluster.yaml``): the job drivers
run there, and every task and actor must land on the second node, which the test checks
with ``ray list actors``. The cluster is isolated from the session's in-process Ray
(``ray_session``): its own ports, temp dir and auth token, and this process never calls
``ray.init`` for it. Each ``ray start --block`` runs in its own process group, killed at
the end (``ray stop`` would stop every Ray on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.verify import verify_catalog
from kb_ray.index.generations import read_current
from tests.cluster.conftest import free_port, wait_for_port
from tests.conftest import GOLDEN_SOURCES, REPO_ROOT

pytestmark = pytest.mark.cluster
RAY = str(Path(sys.executable).with_name("ray"))
STARTED = "block forever"  # what `ray start --block` logs once its node is up


@dataclass
class LocalCluster:
    temp_dir: Path
    gcs_port: int
    dashboard_port: int
    env: dict[str, str]
    processes: list[subprocess.Popen]

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def start_node(self, name: str, *args: str, temp_dir: Path, timeout: float = 90) -> None:
        """Each node its own temp dir, as on separate machines: nodes sharing one would share
        ``runtime_resources/``, and one node's runtime-env agent deletes the job's
        ``working_dir`` under the other's running driver."""
        log = self.temp_dir / f"{name}.log"
        ports = {"--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--metrics-export-port",
                 "--runtime-env-agent-port", "--node-manager-port", "--object-manager-port"}
        command = [RAY, "start", "--block", "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}",
                   "--disable-usage-stats", "--min-worker-port=0", "--max-worker-port=0",
                   *(f"{flag}={free_port()}" for flag in sorted(ports)), *args]
        with open(log, "wb") as out:
            process = subprocess.Popen(command, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.processes.append(process)
        deadline = time.monotonic() + timeout
        while STARTED not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray node {name} did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def ray(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([RAY, *args], env=self.env, cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=timeout)

    def submit(self, *entrypoint: str, timeout: float = 300) -> str:
        """``ray job submit`` (waits for the job); the job's output, asserting it succeeded."""
        done = self.ray("job", "submit", "--address", self.dashboard, "--working-dir", str(REPO_ROOT), "--",
                        sys.executable, *entrypoint, timeout=timeout)
        assert done.returncode == 0 and "succeeded" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]
        return done.stdout

    def stop(self) -> None:
        for process in self.processes:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + 2  # then SIGKILL: a drain (up to 30 s) buys nothing here
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process, signal.SIGKILL)  # drained or not: also its raylet and workers
            process.wait()


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def two_node_cluster():
    # a short path: Ray's unix sockets live under the temp dir (108-byte limit)
    temp_dir = Path(tempfile.mkdtemp(prefix="kbray-", dir="/tmp"))
    worker_temp_dir = Path(tempfile.mkdtemp(prefix="kbrayw-", dir="/tmp"))
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": uuid.uuid4().hex,
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    env.pop("RAY_ADDRESS", None)
    cluster = LocalCluster(temp_dir=temp_dir, gcs_port=free_port(), dashboard_port=free_port(), env=env,
                           processes=[])
    try:
        cluster.start_node("head", "--head", f"--port={cluster.gcs_port}", "--num-cpus=0",
                           "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                           f"--dashboard-port={cluster.dashboard_port}", f"--ray-client-server-port={free_port()}",
                           temp_dir=temp_dir)
        wait_for_port(cluster.dashboard_port, timeout=60)
        cluster.start_node("worker", f"--address=127.0.0.1:{cluster.gcs_port}", "--num-cpus=2",
                           "--resources=" + json.dumps({"worker_node": 1}), temp_dir=worker_temp_dir)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)
        shutil.rmtree(worker_temp_dir, ignore_errors=True)


def test_ingest_and_index_jobs_run_on_the_worker_node(two_node_cluster, tmp_path):
    cluster = two_node_cluster
    sources = tmp_path / "src"
    sources.mkdir()
    for name in ("notes.txt", "manual.pdf"):
        shutil.copy(GOLDEN_SOURCES / name, sources / name)
    settings = ["--config", "conf/local.yaml", "--set", f"kb_root={tmp_path / 'kb'}",
                "--set", f"ingest.sources=[{sources}]"]

    cluster.submit("-m", "jobs.ingest", *settings)  # exits non-zero if a document failed
    actors = json.loads(cluster.ray("list", "actors", "--address", cluster.dashboard, "--detail",
                                    "--format", "json", "--limit", "1000").stdout)
    nodes = json.loads(cluster.ray("list", "nodes", "--address", cluster.dashboard, "--detail",
                                   "--format", "json").stdout)
    worker_node = {n["node_id"] for n in nodes if "worker_node" in (n.get("resources_total") or {})}
    stages = [(a["class_name"], a["node_id"]) for a in actors  # the pools' workers (not the stats collector)
              if (a.get("class_name") or "").startswith("MapWorker(")]
    assert len(worker_node) == 1 and len(nodes) == 2, nodes
    assert {name.split("(")[-1].rstrip(")") for name, _ in stages} == {"ParseStage", "EmbedWriteStage"}, stages
    assert {node for _, node in stages} == worker_node, stages

    cluster.submit("-m", "jobs.build_index", *settings)
    catalog = DeltaCatalog.open(str(tmp_path / "kb"), create=False)
    assert sorted(catalog.read("documents", columns=["uri"]).column("uri").to_pylist()) == [
        str(sources / "manual.pdf"), str(sources / "notes.txt")]
    assert verify_catalog(catalog).ok(strict=True)
    assert read_current(str(tmp_path / "kb")) is not None
