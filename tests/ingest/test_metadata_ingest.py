"""Tags, ACL and metadata from source settings, front matter and sidecars, on a real ingest.

One ingest per module (real Ray, real Delta); an index is built from it and searched with
the tag, metadata and ACL filters; then a sidecar edit is ingested as a metadata-only change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kb_ray.config import load_config
from kb_ray.index.build import build_index
from kb_ray.ingest.run import run_ingest
from kb_ray.search import HybridSearcher
from tests.conftest import REPO_ROOT
from tests.ingest.helpers import INLINE, catalog, log_rows

FILES = {
    "alpha.md": "---\ntags: [frontmatter]\nmetadata: {team: docs, year: 2024}\n---\n# Alpha\n\nApples grow in the "
                "alpha orchard near the river.\n",
    "alpha.md.meta.json": json.dumps({"tags": ["manual"], "metadata": {"lang": "en"}}),
    "bravo.txt": "Bananas ripen in the bravo warehouse every week.\n",
    "charlie.txt": "Cherries are sorted in the charlie hall by hand.\n",
    "charlie.txt.meta.yaml": "acl: [alice]\ntitle: Charlie Handbook\n",
    "broken.txt": "Damsons wait in the broken shed.\n",
    "broken.txt.meta.json": "{not json",
}


def _config(root: Path, source: Path):
    source_entry = {"uri": str(source), "tags": ["src"], "acl": ["group:eng"], "metadata": {"team": "eng"}}
    return load_config(REPO_ROOT / "conf" / "local.yaml", overrides=[
        f"kb_root={root / 'kb'}", "ingest.sources=" + json.dumps([source_entry]), "ingest.micro_batch_docs=2",
        "ray.parse.batch_size=2", "index.filterable_metadata=[team, lang]", INLINE])


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    root = tmp_path_factory.mktemp("meta")
    source = root / "src"
    source.mkdir()
    for name, text in FILES.items():
        (source / name).write_text(text)
    config = _config(root, source)
    report = run_ingest(config)
    return config, source, report


def _documents(config) -> dict[str, dict]:
    rows = catalog(Path(config.kb_root)).read("documents").to_pylist()
    return {Path(row["uri"]).name: row for row in rows}


def _search_uris(config, filters) -> set[str]:
    searcher = HybridSearcher.open(config, gate_max_age_s=0.0)
    hits = searcher.search("fruit orchard warehouse hall shed", k=10, filters=filters).hits
    return {Path(hit["uri"]).name for hit in hits}


def test_source_front_matter_and_sidecar_layer_into_the_documents_rows(ingested):
    config, _, report = ingested
    docs = _documents(config)
    assert sorted(docs) == ["alpha.md", "bravo.txt", "charlie.txt"]  # sidecars are not documents
    assert docs["alpha.md"]["tags"] == ["manual"]  # sidecar replaces front matter's list
    assert docs["alpha.md"]["acl"] == ["group:eng"]
    assert json.loads(docs["alpha.md"]["metadata_json"]) == {"team": "docs", "year": 2024, "lang": "en"}
    assert docs["bravo.txt"]["tags"] == ["src"] and json.loads(docs["bravo.txt"]["metadata_json"]) == {"team": "eng"}
    assert docs["charlie.txt"]["acl"] == ["alice"] and docs["charlie.txt"]["title"] == "Charlie Handbook"
    failures = [(Path(f["uri"]).name, f["reason"]) for f in report.failures]
    assert failures == [("broken.txt", "bad_metadata")]
    logged = {Path(r["uri"]).name: r for r in log_rows(Path(config.kb_root), report.run_id)}
    assert logged["broken.txt"]["status"] == "failed" and logged["broken.txt"]["reason"] == "bad_metadata"


def test_the_index_filters_by_real_tags_metadata_and_acl(ingested):
    config, _, _ = ingested
    build_index(config)
    assert _search_uris(config, {"tags_any": ["manual"]}) == {"alpha.md"}
    assert _search_uris(config, {"metadata": {"team": "eng"}}) == {"bravo.txt", "charlie.txt"}
    assert _search_uris(config, {"metadata": {"lang": "en"}}) == {"alpha.md"}
    assert _search_uris(config, {"acl_any": ["alice"]}) == {"charlie.txt"}
    assert _search_uris(config, {"acl_any": ["group:eng", "alice"]}) == {"alpha.md", "bravo.txt", "charlie.txt"}
    assert _search_uris(config, {"acl_any": ["mallory"]}) == set()


def test_a_sidecar_edit_updates_the_document_without_a_new_version(ingested):
    config, source, _ = ingested
    kb = Path(config.kb_root)
    before = {name: catalog(kb).read(name).num_rows for name in ("versions", "embeddings", "chunks")}
    (source / "bravo.txt.meta.json").write_text(json.dumps({"tags": ["reviewed"]}))
    report = run_ingest(config)
    after = {name: catalog(kb).read(name).num_rows for name in ("versions", "embeddings", "chunks")}
    assert report.documents["metadata_updated"] == 1
    assert after == before  # no new version, chunk or embedding
    docs = _documents(config)
    assert docs["bravo.txt"]["tags"] == ["reviewed"]
    build_index(config)
    assert _search_uris(config, {"tags_any": ["reviewed"]}) == {"bravo.txt"}
    assert _search_uris(config, {"tags_any": ["src"]}) == {"charlie.txt"}
    again = run_ingest(config)  # nothing changed: nothing updated
    assert again.documents.get("metadata_updated") == 0 and again.documents["unchanged"] == 3


# a Ray re-ingest, ~17 s; the sidecar edit above keeps metadata updates in the default run;
# make test-cluster (CI) runs it
@pytest.mark.slow
def test_a_touched_file_with_a_new_sidecar_gets_the_new_metadata(ingested):
    """Same bytes, newer mtime (processed, then found unchanged by its hash) and an edited
    sidecar in the same run: the document takes the sidecar's tags, without a new version."""
    config, source, _ = ingested
    kb = Path(config.kb_root)
    before = {name: catalog(kb).read(name).num_rows for name in ("versions", "embeddings")}
    path = source / "charlie.txt"
    (source / "charlie.txt.meta.yaml").write_text("acl: [alice]\ntitle: Charlie Handbook\ntags: [sorted]\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    report = run_ingest(config)
    assert report.documents["unchanged"] >= 1 and report.documents["metadata_updated"] == 1, report.documents
    assert _documents(config)["charlie.txt"]["tags"] == ["sorted"]  # a sidecar's tags replace the source's
    assert {name: catalog(kb).read(name).num_rows for name in ("versions", "embeddings")} == before
    assert run_ingest(config).documents["metadata_updated"] == 0  # settled: not applied again


def test_a_source_entry_names_its_own_collection(tmp_path):
    """Two sources, one with ``collection`` set: its documents land in that collection (and are
    filterable by it), the plain URI's in ``ingest.collection``."""
    manuals, notes = tmp_path / "manuals", tmp_path / "notes"
    manuals.mkdir(), notes.mkdir()
    (manuals / "pump.txt").write_text("The pump manual covers the impeller.\n")
    (notes / "memo.txt").write_text("A memo about the impeller order.\n")
    sources = [{"uri": str(manuals), "collection": "manuals", "tags": ["manual"]}, str(notes)]
    config = load_config(REPO_ROOT / "conf" / "local.yaml", overrides=[
        f"kb_root={tmp_path / 'kb'}", "ingest.sources=" + json.dumps(sources), "ingest.collection=notes", INLINE])
    assert run_ingest(config).status == "succeeded"
    rows = {Path(row["uri"]).name: row for row in catalog(Path(config.kb_root)).read("documents").to_pylist()}
    assert {name: (row["collection"], row["tags"]) for name, row in rows.items()} == {
        "pump.txt": ("manuals", ["manual"]), "memo.txt": ("notes", [])}
    build_index(config)
    assert _search_uris(config, {"collection": "manuals"}) == {"pump.txt"}
    assert _search_uris(config, {"collection": "notes"}) == {"memo.txt"}
