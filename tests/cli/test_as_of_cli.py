"""``kb-ray search --local --as-of`` and ``kb-ray sql --as-of <time>`` on a synthetic catalog (no Ray)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from kb_ray.cli import main
from kb_ray.index import build_index
from tests.conftest import REPO_ROOT
from tests.index_fixtures import golden_config, synthetic_docs, write_synthetic_catalog

GONE = "doc_doc-001"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    root = tmp_path_factory.mktemp("asof-cli") / "kb"
    catalog = write_synthetic_catalog(root, synthetic_docs(6))
    build_index(golden_config(root, "index.shards=1"))
    kept = catalog.delta_table("documents").version()
    time.sleep(0.03)
    moment = datetime.now(timezone.utc)
    time.sleep(0.03)
    rows = [{**row, "active_version_id": None} for row in catalog.read("documents").to_pylist()
            if row["document_id"] == GONE]
    catalog.merge_upsert("documents", pa.Table.from_pylist(rows, schema=catalog.read("documents").schema),
                         keys=["document_id"])
    args = ["--config", str(REPO_ROOT / "conf" / "local.yaml"), "--set", f"kb_root={root}",
            "--set", "search.evidence=lexical"]
    return {"args": args, "kept": kept, "moment": moment}


def _search(kb, capsys, *extra):
    code = main(["search", "common term", "--local", "--mode", "lexical", "--k", "3", "--json",
                 "--filter", f"document_ids={GONE}", *extra, *kb["args"]])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


def test_search_as_of_a_version_and_a_time_before_the_delete(kb, capsys):
    code, latest = _search(kb, capsys)
    assert code == 0 and latest["hits"] == []
    for point in (str(kb["kept"]), kb["moment"].isoformat()):
        code, result = _search(kb, capsys, "--as-of", point)
        assert code == 0 and result["hits"] and {h["document_id"] for h in result["hits"]} == {GONE}, point
        assert result["as_of"] == {"documents_version": kb["kept"]}


def test_search_as_of_before_any_generation_is_one_line(kb, capsys):
    code, err = _search(kb, capsys, "--as-of", "0")
    assert code != 0 and "no retained index generation covers" in err and len(err.strip().splitlines()) == 1


def test_sql_as_of_a_time(kb, capsys):
    query = f"SELECT count(*) AS n FROM documents WHERE active_version_id IS NULL AND document_id = '{GONE}'"
    assert main(["sql", query, "--json", "--as-of", kb["moment"].isoformat(), *kb["args"]]) == 0
    assert json.loads(capsys.readouterr().out)[0]["n"] == 0
    assert main(["sql", query, "--json", *kb["args"]]) == 0
    assert json.loads(capsys.readouterr().out)[0]["n"] == 1
    with pytest.raises(SystemExit):
        main(["sql", query, "--as-of", "not-a-time", *kb["args"]])
