"""The whole pipeline on S3 (a local moto server): sources, Delta catalog, index generations.

Ray workers reach S3 with the test credentials of ``tests/conftest.py`` (set before Ray
starts) and the endpoint from ``storage_options``.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.storage import fsspec_filesystem
from kb_ray.catalog.verify import verify_catalog
from kb_ray.index import build_index
from kb_ray.index.generations import GenerationError, drop_generation, local_generation_dir, read_current
from kb_ray.index.manifest import MANIFEST_NAME
from kb_ray.ingest.run import run_ingest
from kb_ray.search.searcher import HybridSearcher
from tests.concurrency import race
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.helpers import ingest_config

pytestmark = pytest.mark.cluster


def upload(s3_server, prefix: str, names: list[str]) -> str:
    uri = f"s3://{prefix}"
    fs, path = fsspec_filesystem(uri, s3_server.storage_options)
    for name in names:
        fs.put_file(str(GOLDEN_SOURCES / name), f"{path}/{name}")
    return uri


def s3_config(s3_server, kb_root: str, sources: list[str], *extra: str):
    return ingest_config(kb_root, sources, *s3_server.overrides(), *extra)


def open_catalog(config) -> DeltaCatalog:
    return DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)


@pytest.mark.usefixtures("ray_session")
def test_ingest_index_and_search_on_s3(s3_server, tmp_path, monkeypatch):
    monkeypatch.setenv("KB_RAY_INDEX_CACHE", str(tmp_path / "index-cache"))
    source = upload(s3_server, f"{s3_server.bucket('src')}/docs", ["notes.txt", "guide.md", "manual.pdf"])
    config = s3_config(s3_server, f"s3://{s3_server.bucket('kb')}/kb", [source])
    assert config.storage_options["AWS_ALLOW_HTTP"] == "true"

    report = run_ingest(config)
    assert (report.documents["new"], report.documents["failed"]) == (3, 0), report.failures
    catalog = open_catalog(config)
    assert verify_catalog(catalog).ok(strict=True)
    keys = sorted(catalog.read("documents", columns=["key"]).column("key").to_pylist())
    assert keys == [f"{source}/{name}" for name in ("guide.md", "manual.pdf", "notes.txt")]

    manifest = build_index(config)
    assert read_current(config.kb_root, storage_options=config.storage_options) == manifest.generation_id
    with pytest.raises(GenerationError, match="live generation"):
        drop_generation(config.kb_root, manifest.generation_id, storage_options=config.storage_options)
    hits = HybridSearcher.open(config).search("mechanical seal kit", k=3).hits  # from a local copy
    cached = local_generation_dir(config.kb_root, manifest.generation_id, storage_options=config.storage_options)
    assert cached.parent == tmp_path / "index-cache" and (cached / MANIFEST_NAME).is_file()
    assert len(list(cached.rglob("*"))) > len(manifest.shards)
    assert hits and hits[0]["uri"].endswith("manual.pdf") and "AF-SK-118" in hits[0]["text"], hits[:1]

    again = run_ingest(config)
    assert again.parses == 0 and again.documents["unchanged"] == 3 and again.embeddings["computed"] == 0


@pytest.mark.usefixtures("ray_session")
def test_two_concurrent_ingests_into_one_s3_catalog(s3_server):
    bucket = s3_server.bucket("src")
    first = upload(s3_server, f"{bucket}/a", ["notes.txt", "guide.md"])
    second = upload(s3_server, f"{bucket}/b", ["manual.pdf", "vietnamese.txt"])
    kb_root = f"s3://{s3_server.bucket('kb')}/kb"
    # one document per micro-batch: many small commits that race on the same tables;
    # quarter-CPU actors so both pipelines fit in the session's 2-CPU Ray at once
    extra = ["ingest.micro_batch_docs=1", "ray.parse.batch_size=1", "ray.parse.num_cpus=0.25",
             "ray.embed.num_cpus=0.25"]
    configs = [s3_config(s3_server, kb_root, [source], *extra) for source in (first, second)]
    reports, errors = {}, {}

    def ingest(index: int) -> None:
        try:
            reports[index] = run_ingest(configs[index])
        except BaseException as exc:  # reported below with the other thread's outcome
            errors[index] = exc

    threads = [threading.Thread(target=ingest, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert [reports[i].documents["new"] for i in range(2)] == [2, 2]
    assert all(reports[i].documents["failed"] == 0 for i in range(2))

    catalog = open_catalog(configs[0])
    result = verify_catalog(catalog)
    assert result.ok(strict=True), result
    documents = catalog.read("documents", columns=["uri", "active_version_id"]).to_pylist()
    assert sorted(row["uri"] for row in documents) == sorted(
        [f"{first}/notes.txt", f"{first}/guide.md", f"{second}/manual.pdf", f"{second}/vietnamese.txt"])
    assert all(row["active_version_id"] for row in documents)
    assert catalog.read("sources").num_rows == catalog.read("versions").num_rows == 4
    runs = catalog.read("ingest_runs", columns=["run_id", "status"]).to_pylist()
    assert sorted(row["run_id"] for row in runs) == sorted(reports[i].run_id for i in range(2))
    assert {row["status"] for row in runs} == {"succeeded"}
    assert catalog.read("ingest_log").num_rows == 4


def embedding_rows(*shas: str) -> pa.Table:
    return pa.table({"embedder_fp": ["fp_test"] * len(shas), "embed_text_sha": list(shas),
                     "dim": pa.array([2] * len(shas), pa.int32()), "vector": [[1.0, 0.0]] * len(shas)})


def test_concurrent_catalog_writes_on_s3_all_land_once(s3_server):
    """Appends, worker-file commits, merges and deletes racing on one table (4 writers each)."""
    catalog = DeltaCatalog.open(f"s3://{s3_server.bucket('kb')}/kb", storage_options=s3_server.storage_options)
    writers = 4

    keys = ["embedder_fp", "embed_text_sha"]
    assert not race(lambda w: catalog.append("embeddings", embedding_rows(f"a{w}"), app_id=f"append{w}",
                                             app_version=0), writers=writers)
    files = [catalog.write_data_file("embeddings", embedding_rows(f"c{w}")) for w in range(writers)]
    assert not race(lambda w: catalog.commit_files("embeddings", [files[w]], app_id=f"commit{w}", app_version=0),
                    writers=writers)
    assert not race(lambda w: catalog.merge_upsert("embeddings", embedding_rows(f"m{w}"), keys=keys), writers=writers)
    assert not race(lambda w: catalog.delete("embeddings", f"embed_text_sha = 'a{w}'"), writers=writers)
    shas = sorted(catalog.read("embeddings").column("embed_text_sha").to_pylist())
    assert shas == sorted(f"{kind}{w}" for kind in "cm" for w in range(writers))
    assert catalog.transaction_version("embeddings", "commit3") == 0
