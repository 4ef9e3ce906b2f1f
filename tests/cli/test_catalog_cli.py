"""The ingest and catalog subcommands through ``kb_ray.cli.main`` on a real catalog."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from kb_ray.cli import main
from tests.conftest import REPO_ROOT
from tests.ingest.corpus import HOSTILE_MAX_BYTES, hostile_files, small_corpus
from tests.ingest.helpers import INLINE, catalog


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    corpus = small_corpus(root / "src")
    hostile = hostile_files(corpus / "bad")
    args = ["--config", str(REPO_ROOT / "conf" / "local.yaml"), "--set", f"kb_root={root / 'kb'}",
            "--set", "parse.max_pages=5", "--set", f"parse.max_bytes={HOSTILE_MAX_BYTES}", "--set", INLINE]
    return root, corpus, args, hostile


def test_ingest_json_report_and_exit_code(ingested, capsys):
    root, corpus, args, hostile = ingested
    code = main(["ingest", "--source", str(corpus), "--json", *args])
    report = json.loads(capsys.readouterr().out)
    assert code == 1  # failures occurred, good documents committed
    assert report["documents"]["new"] == 4 and report["documents"]["failed"] == len(hostile)
    for key in ("run_id", "parses", "seconds"):
        assert key in report
    assert set(report["chunks"]) == {"new", "reused"} and set(report["embeddings"]) == {"computed", "cached"}


def test_sql_status_and_ready_queries(ingested, capsys):
    root, corpus, args, _ = ingested
    assert main(["sql", "SELECT count(*) AS n FROM active_documents", "--json", *args]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 4}]
    assert main(["sql", "--query", "failure_reasons", "--csv", *args]) == 0
    assert "too_many_pages" in capsys.readouterr().out
    assert main(["sql", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    for name in listed:
        assert main(["sql", "--query", name, *args]) == 0, name
    capsys.readouterr()
    assert main(["sql", "SELECT count(*) AS n FROM documents", "--as-of", "0", "--json", *args]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 0}]  # version 0: the empty table as created
    assert main(["status", *args]) == 0
    assert "active_documents" in capsys.readouterr().out


def test_verify_passes_then_catches_a_broken_span(ingested, capsys):
    root, corpus, args, _ = ingested
    assert main(["verify", *args]) == 0
    cat = catalog(root / "kb")
    element = next(row for row in cat.read("elements").to_pylist() if row["span_start"] is not None)
    cat.delete("elements", f"element_id = '{element['element_id']}'")
    element["text"] = element["text"] + " (tampered)"
    cat.append("elements", pa.Table.from_pylist([element]))
    capsys.readouterr()
    assert main(["verify", "--json", *args]) == 1
    assert json.loads(capsys.readouterr().out)["violations"]["element_span_mismatch"] == 1
