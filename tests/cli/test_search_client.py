"""``kb-ray search`` / ``ask`` as clients of the service: one readable line for every failure,
``--local`` in-process, and the API key sent as a bearer token."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kb_ray.cli import main
from kb_ray.index import build_index
from tests.index_fixtures import SyntheticDoc, golden_config, write_synthetic_catalog


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _RefusingService(BaseHTTPRequestHandler):
    """Answers every POST with 401 and a JSON ``detail`` naming the Authorization header it got."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"detail": f"refused; got authorization={self.headers.get('authorization')}"}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def refusing_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingService)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("command", [["search", "pump"], ["ask", "pump?"]])
def test_no_reachable_service_is_one_line_and_a_nonzero_exit(command, capsys):
    code = main([*command, "--url", f"http://127.0.0.1:{_free_port()}"])
    captured = capsys.readouterr()
    assert code != 0 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "no kb-ray service is reachable" in lines[0] and "kb-ray serve" in lines[0]
    assert "Traceback" not in captured.err and "ConnectError" not in captured.err
    assert ("--local" in lines[0]) == (command[0] == "search")


def test_an_http_error_reaches_the_cli_as_its_detail_with_the_key_sent(refusing_url, capsys, monkeypatch):
    monkeypatch.setenv("KB_RAY_API_KEY", "kbr_env_key")
    assert main(["search", "pump", "--url", refusing_url]) == 2
    line = capsys.readouterr().err.strip()
    assert line == "kb-ray: error: the service refused the request (HTTP 401): refused; got authorization=Bearer kbr_env_key"
    assert main(["ask", "pump?", "--url", refusing_url, "--api-key", "kbr_flag"]) == 2
    assert capsys.readouterr().err.strip().endswith("authorization=Bearer kbr_flag")


def test_local_searches_the_catalog_in_process(tmp_path, capsys):
    root = tmp_path / "kb"
    write_synthetic_catalog(root, [SyntheticDoc(key="a", chunks=3), SyntheticDoc(key="b", chunks=2)])
    build_index(golden_config(root))
    code = main(["search", "common term", "--local", "--mode", "lexical", "--k", "4", "--json",
                 "--set", f"kb_root={root}", "--set", "search.evidence=none"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and len(result["hits"]) == 4 and result["generation"]


def test_the_evidence_flag_overrides_the_configured_evidence_mode(tmp_path, capsys):
    root = tmp_path / "kb"
    write_synthetic_catalog(root, [SyntheticDoc(key="a", chunks=3)])
    build_index(golden_config(root))
    base = ["search", "common term", "--local", "--mode", "lexical", "--k", "2", "--json",
            "--set", f"kb_root={root}", "--set", "search.evidence=none"]
    assert main(base) == 0
    assert all(hit.get("evidence") is None for hit in json.loads(capsys.readouterr().out)["hits"])
    assert main([*base, "--evidence", "lexical"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert hits and all(hit["evidence"]["quote"] for hit in hits)
