"""Concepts of versions ingested without them (before ``ingest.concepts``, or by another extractor).

``backfill_concepts`` finds the active versions that have chunks but no ``mentions`` rows of the
current extractor, runs the :class:`~kb_ray.ingest.stages.concepts.ConceptStage`'s extraction over
their chunks, and commits the ``concepts`` / ``mentions`` rows as data files, ``versions_per_commit``
versions per commit (app transaction ``concepts-backfill:{id}``), under the catalog's writer lease.
Nothing else changes: no version, chunk or embedding is touched. ``kb-ray backfill-concepts``.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.lease import writer_lease
from kb_ray.config import KbConfig
from kb_ray.index.concepts import ConceptExtractor, version_concepts
from kb_ray.index.rows import open_session
from kb_ray.ingest.rows import to_table

logger = logging.getLogger(__name__)
TABLES = ("documents", "version_chunks", "chunks", "mentions")

_MISSING = """
    SELECT DISTINCT d.active_version_id AS version_id FROM documents d
    JOIN version_chunks vc ON vc.version_id = d.active_version_id
    WHERE d.active_version_id IS NOT NULL AND d.active_version_id NOT IN
        (SELECT version_id FROM mentions WHERE extractor_fp = ?)
    ORDER BY 1
"""
_CHUNKS = """
    SELECT vc.version_id, c.chunk_id, c.text FROM version_chunks vc JOIN chunks c ON c.chunk_id = vc.chunk_id
    WHERE vc.version_id IN (SELECT unnest(?)) ORDER BY vc.version_id, vc.ordinal
"""


@dataclass
class BackfillReport:
    versions: int = 0
    chunks: int = 0
    mentions: int = 0
    concepts: int = 0


def backfill_concepts(config: KbConfig, *, versions_per_commit: int = 500) -> BackfillReport:
    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    extractor, report = ConceptExtractor(), BackfillReport()
    with writer_lease(catalog, config, holder="backfill-concepts"):
        connection = open_session(catalog, {name: catalog.delta_table(name).version() for name in TABLES})
        try:
            missing = [row[0] for row in connection.execute(_MISSING, [extractor.fingerprint]).fetchall()]
            app_id = f"concepts-backfill:{uuid.uuid4().hex}"
            for batch_no, start in enumerate(range(0, len(missing), versions_per_commit)):
                chunks = connection.sql(_CHUNKS, params=[missing[start:start + versions_per_commit]]).to_arrow_table()
                _commit(catalog, chunks.to_pylist(), extractor, report, app_id=app_id, batch_no=batch_no)
        finally:
            connection.close()
    logger.info("concepts backfilled: %s", report)
    return report


def _commit(catalog: DeltaCatalog, chunks: list[dict], extractor: ConceptExtractor, report: BackfillReport, *,
            app_id: str, batch_no: int) -> None:
    concepts, mentions = [], []
    by_version: dict[str, list[tuple[str, str]]] = {}
    for row in chunks:
        by_version.setdefault(row["version_id"], []).append((row["chunk_id"], row["text"] or ""))
    for version_id, pairs in by_version.items():
        version_concept_rows, version_mentions = version_concepts(version_id, pairs, extractor)
        concepts += version_concept_rows
        mentions += version_mentions
    for name, rows in (("concepts", concepts), ("mentions", mentions)):
        if rows:
            data_file = catalog.write_data_file(name, to_table(name, rows))
            catalog.commit_files(name, [data_file], app_id=app_id, app_version=batch_no)
    report.versions += len(by_version)
    report.chunks += len(chunks)
    report.mentions += len(mentions)
    report.concepts += len(concepts)
