"""Binary ``COPY`` of a publication's rows and passage vectors (kb_ray/publish/postgres.py).

Rows become tuples in :data:`postgres_schema.COLUMNS` order, passages in
:data:`postgres_schema.PASSAGE_COLUMNS` order; each goes in ``COPY … FROM STDIN (FORMAT BINARY)``
statements of ``batch_rows`` records (psycopg 3 ``cursor.copy``, ``write_row``).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from kb_ray.embedding.fingerprint import HEADING_SEPARATOR
from kb_ray.index.channels import file_name
from kb_ray.publish import postgres_schema as schema
from kb_ray.publish.served import RowVectors

logger = logging.getLogger(__name__)


def copy_rows(connection, table: str, rows: pa.Table, vectors: np.ndarray, *, batch_rows: int) -> int:
    """COPY the hydration ``rows`` with their chunk ``vectors`` into ``table``; the rows copied."""
    records = itertools.chain.from_iterable(publication_records(rows.slice(start, batch_rows),
                                                                vectors[start:start + batch_rows])
                                            for start in range(0, rows.num_rows, batch_rows))
    return _copy(connection, table, schema.COLUMNS, records, total=rows.num_rows, batch_rows=batch_rows)


def copy_passages(connection, passages: str, data: RowVectors, *, batch_rows: int) -> int:
    """COPY the passage vectors of ``data``'s rows into the passage table ``passages``."""
    chunk_ids = np.asarray(data.rows.column("chunk_id").to_pylist(), dtype=object)[data.passage_rows]
    records = zip(chunk_ids.tolist(), passage_numbers(data.passage_rows).tolist(), data.passage_vectors)
    return _copy(connection, passages, schema.PASSAGE_COLUMNS, records, total=len(chunk_ids), batch_rows=batch_rows)


def passage_numbers(owners: np.ndarray) -> np.ndarray:
    """Each passage's number within its row (0, 1, … in the order ``owners`` lists them)."""
    order = np.argsort(owners, kind="stable")
    grouped = owners[order]
    numbers = np.empty(len(owners), np.int64)
    numbers[order] = np.arange(len(owners)) - np.searchsorted(grouped, grouped, side="left")
    return numbers


def _copy(connection, table: str, columns: tuple[tuple[str, str], ...], records: Iterable[tuple], *, total: int,
          batch_rows: int) -> int:
    from psycopg import sql

    statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(name) for name, _ in columns))
    records, copied = iter(records), 0
    with connection.cursor() as cursor:
        while batch := list(itertools.islice(records, batch_rows)):
            with cursor.copy(statement) as copy:
                copy.set_types([kind for _, kind in columns])
                for record in batch:
                    copy.write_row(record)
            copied += len(batch)
            logger.info("copied %d/%d rows into %s", copied, total, table)
    return copied


def publication_records(rows: pa.Table, vectors: np.ndarray) -> Iterator[tuple]:
    """One tuple per row in :data:`postgres_schema.COLUMNS` order (hydration rows → Postgres values)."""
    from psycopg.types.json import Jsonb

    data = rows.select(["chunk_id", "document_id", "version_id", "title", "uri", "collection", "tags", "mime",
                        "created_at", "acl", "metadata_json", "text", "heading_path", "spans", "pages", "regions",
                        "ordinal", "chunk_kind"]).to_pylist()
    for row, vector in zip(data, vectors):
        yield (row["chunk_id"], row["document_id"], row["version_id"], row["title"], row["uri"],
               file_name(row["uri"]) or None, row["collection"], row["tags"] or [], row["mime"], row["created_at"],
               row["acl"] or [], Jsonb(_metadata(row["metadata_json"])), row["text"],
               HEADING_SEPARATOR.join(row["heading_path"] or []), row["heading_path"] or [],
               Jsonb(row["spans"] or []), row["pages"] or [], Jsonb(row["regions"] or []), row["ordinal"],
               row["chunk_kind"], vector)


def _metadata(text: str | None) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
