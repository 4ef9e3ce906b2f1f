"""``PostgresPublisher``: one index generation → Postgres (pgvector + full text), idempotently.

``publish`` reads what a searcher of the generation serves (kb_ray/publish/served.py: its
hydration Parquet and FAISS vectors, chunk and passage vectors, base ∪ delta segments, minus
versions the catalog no longer has active) and, in ONE transaction under an advisory lock:

* a generation (+ segment count) not published yet: creates its chunk and passage tables, loads
  them with binary ``COPY`` in batches (kb_ray/publish/postgres_copy.py), builds the HNSW
  (cosine) and GIN indexes, records it in ``kb_publications`` and switches the ``kb_chunks`` and
  ``kb_passages`` views to it;
* one already published: deletes the rows of versions tombstoned or superseded since (their
  passages go by ``ON DELETE CASCADE``), copies rows of versions active again with their
  passages; nothing at all when both are empty (``unchanged``); the views are switched to it if
  they pointed elsewhere. A publication written before passage tables gets its passage table,
  one written before tie keys its ``tie_key`` column (and the views are made again);
* with ``drop_old``: drops every other publication's tables.

The SQL functions (``kb_hybrid_search``: RRF of the vector and full-text ranks with the
kb-ray filter vocabulary) are (re)created each time. Docs: docs/publish.md.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.config import KbConfig
from kb_ray.errors import KbRayError
from kb_ray.publish import postgres_schema as schema
from kb_ray.publish.postgres_copy import copy_passages, copy_rows
from kb_ray.publish.served import ServedRows, read_served_rows, resolve_generation

logger = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 2000


class PublishError(KbRayError):
    """Postgres is unreachable, lacks pgvector, or a publication cannot be written."""


@dataclass(frozen=True)
class PublishResult:
    action: Literal["published", "updated", "unchanged"]
    table: str
    generation_id: str
    segment: int
    rows: int  # rows in the table afterwards
    copied_rows: int = 0
    deleted_rows: int = 0
    passages: int = 0  # passage vectors in the passage table afterwards
    copied_passages: int = 0
    switched: bool = False  # the kb_chunks and kb_passages views now show this publication and did not before
    dropped: list[str] = field(default_factory=list)  # other publications' chunk tables, dropped with their passages
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # read, copy, copy_passages, index seconds

    @property
    def rows_per_s(self) -> float:
        return round(self.copied_rows / self.seconds, 1) if self.seconds and self.copied_rows else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rows_per_s": self.rows_per_s}


def table_name(generation_id: str, segment: int) -> str:
    """``kb_chunks_<16 hex>`` (+ ``_sNNNN`` with delta segments): well under Postgres' 63 bytes."""
    short = generation_id.removeprefix("gen_")[:16]
    return f"kb_chunks_{short}" + (f"_s{segment:04d}" if segment else "")


def passage_table_name(table: str) -> str:
    """The passage table of the chunk table ``table``: ``kb_passages_`` + the same suffix."""
    return "kb_passages_" + table.removeprefix("kb_chunks_")


class PostgresPublisher:
    """Publishes generations of one knowledge base to the database at ``dsn``."""

    def __init__(self, config: KbConfig, dsn: str, *, batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        try:
            import pgvector.psycopg  # noqa: F401
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise PublishError("Postgres publication needs psycopg 3 and pgvector: "
                               "pip install 'kb-ray[postgres]'") from exc
        self.config = config
        self.dsn = dsn
        self.batch_rows = batch_rows

    def publish(self, generation_id: str | None = None, *, drop_old: bool = False) -> PublishResult:
        started = time.perf_counter()
        served = read_served_rows(self.config, resolve_generation(self.config, generation_id))
        read_s = time.perf_counter() - started
        table = table_name(served.manifest.generation_id, served.segment)
        if served.manifest.dim == 0:
            raise PublishError(f"generation {served.manifest.generation_id} indexes no chunks: nothing to publish")
        with self._connect() as connection, connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", [schema.LOCK_KEY])
            self._ensure_schema(connection)
            existing = self._published_versions(connection, table)
            if existing is None:
                result = self._create(connection, served, table)
            else:
                result = self._sync(connection, served, table, existing)
            switched = self._switch_if_needed(connection, table)
            dropped = self._drop_others(connection, table) if drop_old else []
            seconds = round(time.perf_counter() - started, 3)
            if result.action != "unchanged":
                connection.execute(f"UPDATE {schema.PUBLICATIONS} SET publish_seconds = %s WHERE table_name = %s",
                                   [seconds, table])
        timings = {"read": round(read_s, 3), **result.timings}
        result = PublishResult(**{**asdict(result), "switched": switched, "dropped": dropped, "seconds": seconds,
                                  "timings": timings})
        logger.info("postgres publication %s: %s (%d rows, %d copied, %d deleted; %d passages, %d copied)", table,
                    result.action, result.rows, result.copied_rows, result.deleted_rows, result.passages,
                    result.copied_passages)
        return result

    # -- connection and schema -------------------------------------------------------------

    def _connect(self):
        import psycopg

        try:
            return psycopg.connect(self.dsn)
        except psycopg.OperationalError as exc:
            raise PublishError(f"cannot connect to Postgres: {exc}".strip()) from exc

    def _ensure_schema(self, connection) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        try:
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.FeatureNotSupported as exc:
            raise PublishError("the pgvector extension is not installed in this Postgres server: install the "
                               "package postgresql-NN-pgvector (docs/publish.md)") from exc
        register_vector(connection)
        connection.execute(schema.PUBLICATIONS_DDL)
        connection.execute(schema.PUBLICATIONS_UPGRADE)
        connection.execute(schema.TEXT_CONFIG_DDL)
        version = connection.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        iterative = tuple(int(part) for part in version.split(".")[:2]) >= (0, 8)
        for ddl in schema.function_ddl(filterable_metadata=list(self.config.index.filterable_metadata),
                                       iterative_scan=iterative):
            connection.execute(ddl)

    @staticmethod
    def _published_versions(connection, table: str) -> set[str] | None:
        found = connection.execute(f"SELECT 1 FROM {schema.PUBLICATIONS} WHERE table_name = %s", [table]).fetchone()
        if found is None:
            return None
        from psycopg import sql

        rows = connection.execute(sql.SQL("SELECT DISTINCT version_id FROM {}").format(sql.Identifier(table)))
        return {row[0] for row in rows}

    # -- writing -----------------------------------------------------------------------------

    def _create(self, connection, served: ServedRows, table: str) -> PublishResult:
        manifest, passages = served.manifest, passage_table_name(table)
        connection.execute(schema.create_table(table, manifest.dim))
        connection.execute(schema.create_passage_table(passages, manifest.dim))
        started = time.perf_counter()
        copied = copy_rows(connection, table, served.rows, served.vectors, batch_rows=self.batch_rows)
        rows_at = time.perf_counter()
        copied_passages = copy_passages(connection, passages, served, batch_rows=self.batch_rows)
        copied_at = time.perf_counter()
        for statement in [*schema.create_indexes(table), *schema.create_passage_indexes(passages, table)]:
            connection.execute(statement)
        _analyze(connection, table, passages)
        timings = {"copy": round(rows_at - started, 3), "copy_passages": round(copied_at - rows_at, 3),
                   "index": round(time.perf_counter() - copied_at, 3)}
        connection.execute(
            f"INSERT INTO {schema.PUBLICATIONS} (table_name, generation_id, segment, embedder_fp, dim, rows, "
            "passages, catalog_versions, text_config) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [table, manifest.generation_id, served.segment, manifest.embedder_fp, manifest.dim, copied,
             copied_passages, json.dumps(served.catalog_versions, sort_keys=True), schema.TEXT_CONFIG])
        return PublishResult("published", table, manifest.generation_id, served.segment, copied, copied_rows=copied,
                             passages=copied_passages, copied_passages=copied_passages, timings=timings)

    def _sync(self, connection, served: ServedRows, table: str, existing: set[str]) -> PublishResult:
        """Tombstones and reactivations since the last publish of the same generation and segments."""
        from psycopg import sql

        wanted = served.active_versions
        gone, back = sorted(existing - wanted), sorted(wanted - existing)
        deleted = copied = 0
        if gone:  # their passages go with them (ON DELETE CASCADE)
            deleted = connection.execute(sql.SQL("DELETE FROM {} WHERE version_id = ANY(%s)").format(
                sql.Identifier(table)), [gone]).rowcount
        added = self._add_passage_table(connection, served, table, versions=existing & wanted)
        copied_passages = added or 0
        upgraded = _add_tie_key(connection, table)
        if back:
            returning = served.where(_version_mask(served.rows, back))
            copied = copy_rows(connection, table, returning.rows, returning.vectors, batch_rows=self.batch_rows)
            copied_passages += copy_passages(connection, passage_table_name(table), returning,
                                             batch_rows=self.batch_rows)
        rows, passages = _counts(connection, table)
        changed = bool(gone or back) or added is not None or upgraded
        if changed:
            connection.execute(f"UPDATE {schema.PUBLICATIONS} SET rows = %s, passages = %s, updated_at = now() "
                               "WHERE table_name = %s", [rows, passages, table])
        return PublishResult("updated" if changed else "unchanged", table, served.manifest.generation_id,
                             served.segment, rows, copied_rows=copied, deleted_rows=deleted, passages=passages,
                             copied_passages=copied_passages)

    def _add_passage_table(self, connection, served: ServedRows, table: str, *, versions: set[str]) -> int | None:
        """A publication written before passage tables gets one, with the passages of its rows of
        ``versions``; the passages copied, None when it had one."""
        passages = passage_table_name(table)
        if connection.execute("SELECT to_regclass(%s)", [passages]).fetchone()[0] is not None:
            return None
        logger.info("%s was published without passage vectors: adding %s", table, passages)
        connection.execute(schema.create_passage_table(passages, served.manifest.dim))
        kept = served.where(_version_mask(served.rows, sorted(versions)))
        copied = copy_passages(connection, passages, kept, batch_rows=self.batch_rows)
        for statement in schema.create_passage_indexes(passages, table):
            connection.execute(statement)
        return copied

    # -- the view and old tables ---------------------------------------------------------------

    @staticmethod
    def _switch_if_needed(connection, table: str) -> bool:
        """(Re)make the views unless they already show every column of ``table`` and its passage
        table (a view made by ``SELECT *`` does not show a column added to its table later)."""
        live = connection.execute(f"SELECT table_name FROM {schema.PUBLICATIONS} WHERE live").fetchone()
        if live and live[0] == table and all(_shows_every_column(connection, view, source) for view, source in (
                (schema.VIEW, table), (schema.PASSAGES_VIEW, passage_table_name(table)))):
            return False
        statements = schema.switch_view(table, passage_table_name(table))
        for statement in statements[:-1]:
            connection.execute(statement)
        connection.execute(statements[-1], [table])
        return True

    @staticmethod
    def _drop_others(connection, keep: str) -> list[str]:
        from psycopg import sql

        others = [row[0] for row in connection.execute(
            f"SELECT table_name FROM {schema.PUBLICATIONS} WHERE table_name <> %s ORDER BY table_name", [keep])]
        for table in others:
            connection.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
                sql.Identifier(passage_table_name(table)), sql.Identifier(table)))
        connection.execute(f"DELETE FROM {schema.PUBLICATIONS} WHERE table_name <> %s", [keep])
        return others


def _columns(connection, relation: str) -> set[str]:
    return {row[0] for row in connection.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = %s", [relation])}


def _shows_every_column(connection, view: str, source: str) -> bool:
    """The view exists and has every column of ``source``."""
    shown = _columns(connection, view)
    return bool(shown) and _columns(connection, source) <= shown


def _add_tie_key(connection, table: str) -> bool:
    """A publication written before tie keys gains its generated column (a rewrite of the table);
    True when it did."""
    if "tie_key" in _columns(connection, table):
        return False
    logger.info("%s was published without tie keys: adding the column", table)
    connection.execute(schema.add_tie_key(table))
    return True


def _version_mask(rows: pa.Table, versions: list[str]) -> np.ndarray:
    found = pc.is_in(rows.column("version_id"), value_set=pa.array(versions, pa.string()))
    return found.to_numpy(zero_copy_only=False).astype(bool)


def _counts(connection, table: str) -> tuple[int, int]:
    from psycopg import sql

    return connection.execute(sql.SQL("SELECT (SELECT count(*) FROM {}), (SELECT count(*) FROM {})").format(
        sql.Identifier(table), sql.Identifier(passage_table_name(table)))).fetchone()


def _analyze(connection, *tables: str) -> None:
    from psycopg import sql

    for table in tables:
        connection.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))


def hybrid_search(connection, query_vector: Sequence[float] | np.ndarray, query_text: str, *, k: int = 10,
                  filters: dict[str, Any] | None = None, candidates: int = 100, rrf_k: int = 60) -> list[dict]:
    """Call ``kb_hybrid_search`` (psycopg 3 connection with pgvector registered) → hit dicts."""
    from psycopg.rows import dict_row
    from psycopg.types.json import Jsonb

    with connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute("SELECT * FROM kb_hybrid_search(%s, %s, %s, %s, %s, %s)",
                       [np.asarray(query_vector, np.float32).reshape(-1), query_text, k, Jsonb(filters or {}),
                        candidates, rrf_k])
        return cursor.fetchall()
