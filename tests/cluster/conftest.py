"""A local S3 (moto server) for the whole session, and fresh buckets per test."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import pytest

REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, *, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    @property
    def storage_options(self) -> dict[str, str]:
        """delta-rs style options, as a config's ``storage_options`` holds them."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true",
                "conditional_put": "etag"}

    def overrides(self) -> list[str]:
        """The same options as ``--set`` overrides (quoted: values must be strings)."""
        return [f'storage_options.{key}="{value}"' for key, value in self.storage_options.items()]

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION)

    def bucket(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.client().create_bucket(Bucket=name)
        return name


@pytest.fixture(scope="session")
def s3_server():
    """``moto_server`` on a free loopback port, terminated at the end of the session."""
    pytest.importorskip("moto.server", reason="pip install kb-ray[test] (moto[server])")
    pytest.importorskip("s3fs", reason="pip install kb-ray[s3] (s3fs)")
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, timeout=30, process=process)
        yield S3Server(endpoint=f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
