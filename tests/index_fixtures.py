"""Shared by tests/index and tests/search: the golden catalog (ingested once per session),
a synthetic catalog written straight to Delta (no Ray), and quote-labelled golden queries.

The golden ingest is memoized at module level: both conftests import these fixtures, and
pytest would otherwise run a session fixture once per conftest that defines it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.config import KbConfig, load_config

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
SYNTHETIC_FP = "fp_synthetic_embedder"
_GOLDEN: dict[str, str] = {}
GOLDEN_FILES = len(list((REPO / "golden" / "sources").iterdir()))

# (query, golden file, a quote that the relevant chunk contains)
GOLDEN_QUERIES = [
    ("AquaFlow pump mechanical seal kit part number", "manual.pdf", "AF-SK-118"),
    ("maximum discharge pressure during normal pump operation", "manual.pdf", "below 8 bar"),
    ("Is the AF-220 pump self-priming?", "manual.pdf", "not self-priming"),
    ("total recordable incident rate TRIR in 2025", "headers_footers.pdf", "0.84 (2024: 1.12)"),
    ("technician fell from the baghouse mezzanine at Ridgeway", "headers_footers.pdf", "baghouse mezzanine"),
    ("how many eelgrass shoots were transplanted in Halvik Bay", "two_column.pdf", "38,400"),
    ("Northgate Library Trust grant paid in instalments", "no_headings.pdf", "three instalments"),
    ("SolVerde module output at 65 °C cell temperature", "figure.pdf", "86.4 percent"),
    ("nominal operating cell temperature NOCT of the SV-405M", "figure.pdf", "43 °C ± 2 °C"),
    ("length of the Brenner Hills rail tunnel", "long_report.pdf", "6.8-kilometre tunnel"),
    ("which rail alignment option is recommended", "long_report.pdf", "Adopt Option B"),
    ("container throughput Port of Carver Bay TEU in 2024", "long_report.pdf", "1.42 million"),
    ("one-time home office allowance for furniture", "policy.docx", "€450"),
    ("core hours remote employees must be available", "policy.docx", "between 10:00 and 15:00"),
    ("Helios BMS field failure rate", "slides.pptx", "0.18%"),
    ("firmware 3.5.0 target date CAN-FD secure boot", "slides.pptx", "12 Dec 2025"),
    ("CycleLink day pass price", "faq.html", "$12.00"),
    ("how do I unlock a bike with the app", "faq.html", "Scan the QR code"),
    ("Orchard error E1042 snapshot signature mismatch", "guide.md", "E1042"),
    ("ORCHARD_TOKEN environment variable in CI pipelines", "guide.md", "ORCHARD_TOKEN"),
    ("community garden plot waiting list", "notes.txt", "23 names"),
    ("beekeeper offered to place hives in the garden", "notes.txt", "two hives"),
    ("vùng chè Tân Cương Thái Nguyên", "vietnamese.txt", "Tân Cương"),
]


def golden_config(kb_root: str | Path, *overrides: str) -> KbConfig:
    return load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={kb_root}", *overrides])


def ingest_golden_once(base: Path) -> str:
    """Ingest golden/sources into ``base/golden_kb`` once per process; return kb_root."""
    if "root" not in _GOLDEN:
        from kb_ray.ingest.run import run_ingest

        root = base / "golden_kb"
        # in the driver (kb_ray/ingest/inline.py), as `kb-ray watch` and uploads ingest a few files: the
        # same stage classes and catalog as the Ray pipeline (tests/ingest/test_inline.py), without
        # starting Ray Data's actor pools; tests/ingest/test_ingest.py ingests golden through Ray
        report = run_ingest(golden_config(root, f"ingest.inline_max_docs={GOLDEN_FILES}"))
        assert report.status == "succeeded", report.to_dict()
        _GOLDEN["root"] = str(root)
    return _GOLDEN["root"]


def copy_kb(kb_root: str, destination: Path) -> str:
    """A private copy of a knowledge base, for tests that change the catalog or CURRENT."""
    shutil.copytree(kb_root, destination, ignore=shutil.ignore_patterns("indexes"))
    return str(destination)


@pytest.fixture(scope="session")
def golden_kb(tmp_path_factory) -> str:
    """kb_root of the golden catalog; treat it as read-only (use copy_kb to change it)."""
    return ingest_golden_once(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def text_embedder():
    from kb_ray.embedding.text import TextEmbedder

    return TextEmbedder(num_threads=1)


# -- synthetic catalogs --------------------------------------------------------------------


@dataclass
class SyntheticDoc:
    key: str
    collection: str = "alpha"
    tags: list[str] = field(default_factory=list)
    mime: str = "text/plain"
    created_at: datetime = datetime(2025, 1, 1, tzinfo=timezone.utc)
    metadata: dict = field(default_factory=dict)
    chunks: int = 2
    active: bool = True
    texts: list[str] | None = None  # chunk texts (default: generated; sets ``chunks``)
    headings: list[list[str]] | None = None  # heading path per chunk (default: [title])


def synthetic_docs(count: int = 48) -> list[SyntheticDoc]:
    """Documents cycling through collections, tags, mimes, dates and metadata values."""
    collections, mimes = ["alpha", "beta", "gamma"], ["application/pdf", "text/markdown", "text/html", "text/plain"]
    tag_sets = [["red"], ["blue"], ["red", "blue"], [], ["green", "red"]]
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    return [
        SyntheticDoc(key=f"doc-{i:03d}", collection=collections[i % 3], tags=tag_sets[i % 5], mime=mimes[i % 4],
                     created_at=start + timedelta(days=10 * i), chunks=1 + i % 3,
                     metadata={"team": ["search", "ingest"][i % 2], "year": 2024 + i % 2})
        for i in range(count)
    ]


def write_synthetic_catalog(kb_root: str | Path, docs: list[SyntheticDoc], *, dim: int = 16, seed: int = 0,
                            embedder_fp: str = SYNTHETIC_FP) -> DeltaCatalog:
    """Write documents/versions/chunks/version_chunks/embeddings rows with random unit vectors."""
    catalog = DeltaCatalog.open(str(kb_root))
    rng = np.random.default_rng(seed)
    rows = {name: [] for name in ("documents", "versions", "chunks", "version_chunks", "embeddings")}
    for doc in docs:
        _synthetic_rows(doc, rows, rng, dim=dim, embedder_fp=embedder_fp)
    for name, table_rows in rows.items():
        catalog.append(name, pa.Table.from_pylist(table_rows, schema=_schema(name)))
    return catalog


def _schema(name: str) -> pa.Schema:
    from kb_ray.catalog.contract import table_spec

    return table_spec(name).schema


def _synthetic_rows(doc: SyntheticDoc, rows: dict, rng, *, dim: int, embedder_fp: str) -> None:
    document_id, version_id = f"doc_{doc.key}", f"ver_{doc.key}"
    texts = doc.texts or [f"common term {doc.key} part {n} about {doc.collection} things" for n in range(doc.chunks)]
    canonical = "\n\n".join(texts)
    rows["documents"].append({
        "document_id": document_id, "collection": doc.collection, "key": doc.key, "uri": f"mem://{doc.key}",
        "title": f"Title {doc.key}", "mime": doc.mime, "tags": doc.tags, "metadata_json": json.dumps(doc.metadata),
        "active_version_id": version_id if doc.active else None, "created_at": doc.created_at})
    rows["versions"].append({"version_id": version_id, "document_id": document_id, "status": "committed",
                             "canonical_text": canonical, "mime": doc.mime, "title": f"Title {doc.key}"})
    start = 0
    for n, text in enumerate(texts):
        chunk_id, sha = f"ch_{doc.key}_{n}", f"sha_{doc.key}_{n}"
        vector = rng.normal(size=dim).astype(np.float32)
        rows["chunks"].append({"chunk_id": chunk_id, "document_id": document_id, "text": text,
                               "heading_path": doc.headings[n] if doc.headings else [f"Title {doc.key}"],
                               "embed_text_sha": sha})
        rows["version_chunks"].append({"version_id": version_id, "chunk_id": chunk_id, "ordinal": n,
                                       "spans": [{"start": start, "end": start + len(text)}], "pages": [1],
                                       "regions": [{"page": 1, "x0": 0.1, "y0": 0.1 * n, "x1": 0.9, "y1": 0.1 * n + 0.05}]})
        rows["embeddings"].append({"embedder_fp": embedder_fp, "embed_text_sha": sha, "dim": dim,
                                   "vector": (vector / np.linalg.norm(vector)).tolist()})
        start += len(text) + 2
