"""Shared by test_summary.py and test_compare.py: an in-process Answerer over the golden
catalog (one index build per module) and the check that a citation is the canonical text of
an active version of the document it names."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kb_ray.answer.local import local_answerer
from kb_ray.catalog import DeltaCatalog
from kb_ray.index import build_index
from tests.index_fixtures import copy_kb, golden_config

_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


class RecordingEmbedder:
    """The packaged text embedder, recording every text it is asked to embed (``texts``)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder, self.texts = embedder, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.embedder, name)

    def embed_texts(self, texts: list[str]) -> Any:
        self.texts += list(texts)
        return self.embedder.embed_texts(texts)

    def embed_query(self, text: str) -> Any:
        self.texts.append(text)
        return self.embedder.embed_query(text)


@pytest.fixture(scope="module")
def answerer(golden_kb, tmp_path_factory, text_embedder):
    """``answerer.recorded``: what its embedder was asked to embed."""
    # a copy, answers not logged: the session's golden_kb is shared by other modules (test_log counts its rows)
    root = copy_kb(golden_kb, tmp_path_factory.mktemp("modes") / "kb")
    config = golden_config(root, "index.shards=1", "answer.log=false")
    build_index(config)
    recording = RecordingEmbedder(text_embedder)
    built = local_answerer(config, embedder=recording)
    built.recorded = recording.texts
    return built


@pytest.fixture(scope="module")
def catalog_text(golden_kb) -> dict[str, Any]:
    """document_id -> (active version_id, its canonical text), and file name -> document_id."""
    catalog = DeltaCatalog.open(golden_kb, create=False)
    versions = catalog.read("versions", columns=["version_id", "canonical_text"]).to_pylist()
    canonical = {row["version_id"]: row["canonical_text"] for row in versions}
    documents = catalog.read("documents", columns=["document_id", "uri", "active_version_id"]).to_pylist()
    return {"active": {d["document_id"]: (d["active_version_id"], canonical[d["active_version_id"]])
                       for d in documents if d["active_version_id"]},
            "by_file": {d["uri"].rsplit("/", 1)[-1]: d["document_id"] for d in documents}}


def assert_verbatim(citation: dict[str, Any], document_id: str, catalog_text: dict[str, Any]) -> None:
    """The citation's quote is the canonical text at its spans of the active version of THAT document."""
    assert citation["document_id"] == document_id
    version_id, canonical = catalog_text["active"][document_id]
    assert citation["version_id"] == version_id
    assert citation["quote"] == "\n".join(canonical[start:end] for start, end in citation["spans"])
    assert citation["pages"] or not citation["regions"]


def markers(text: str) -> set[int]:
    return {int(n) for group in _MARKER.findall(text) for n in group.split(",")}
