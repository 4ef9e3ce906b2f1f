from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import KbConfig, load_config
from tests.conftest import REPO_ROOT

# A test that is not about the Ray pipeline ingests its few files in the driver (kb_ray/ingest/inline.py):
# the same stage classes and the same catalog (tests/ingest/test_inline.py), without starting Ray
# Data's actor pools (15-50 s each on 2 cores, #41). Tests of the pipeline itself leave it out.
INLINE = "ingest.inline_max_docs=64"


def ingest_config(kb_root: Path, sources: list[Path], *extra: str) -> KbConfig:
    overrides = [f"kb_root={kb_root}", "ingest.sources=[" + ",".join(str(s) for s in sources) + "]",
                 "ingest.micro_batch_docs=2", "ray.parse.batch_size=2", *extra]
    return load_config(REPO_ROOT / "conf" / "local.yaml", overrides=overrides)


def catalog(kb_root: Path) -> DeltaCatalog:
    return DeltaCatalog.open(str(kb_root), create=False)


def state(kb_root: Path) -> dict[str, object]:
    """What a reader sees plus every table's row multiset: equal states are equal catalogs."""
    cat = catalog(kb_root)
    documents = cat.read("documents").sort_by("document_id")
    keyed = {
        "documents": sorted(zip(documents.column("document_id").to_pylist(),
                                documents.column("active_version_id").to_pylist())),
    }
    for name, keys in {"versions": ["version_id"], "elements": ["version_id", "element_id"],
                       "chunks": ["chunk_id"], "version_chunks": ["version_id", "chunk_id"],
                       "embeddings": ["embedder_fp", "embed_text_sha"], "pages": ["version_id", "page_no"]}.items():
        table = cat.read(name, columns=keys)
        keyed[name] = sorted(tuple(row.values()) for row in table.to_pylist())
    return keyed


def log_rows(kb_root: Path, run_id: str) -> list[dict]:
    table: pa.Table = catalog(kb_root).read("ingest_log")
    return [row for row in table.to_pylist() if row["run_id"] == run_id]
