"""The SQL of a Postgres publication (docs/publish.md): bookkeeping table, chunk and passage
tables, the ``kb_chunks`` and ``kb_passages`` views and the ``kb_hybrid_search`` function.

One table per published generation (``kb_chunks_<16 hex of the generation id>``, ``_sNNNN``
appended when delta segments are included) holds one row per served chunk with its vector
(pgvector, HNSW with cosine ops) and a stored ``tsvector`` (GIN); its passage table
(``kb_passages_<same suffix>``) holds the chunks' passage vectors (kb_ray/index/passages.py),
one row each, deleted with their chunk (``ON DELETE CASCADE``). ``kb_chunks`` and
``kb_passages`` are views over the tables published last; publishing switches both in the same
transaction.
"""

from __future__ import annotations

from psycopg import sql

TEXT_CONFIG = "kb_english_unstemmed"
"""Text search configuration of the ``tsv`` column and of the queries, made like kb-ray's default
analyzer (kb_ray/index/analyzer.py): lowercase words without English stop words, not stemmed.
It is Postgres' ``english`` configuration with its word types mapped to a ``simple`` dictionary
with the English stop word list; on golden it agreed with kb-ray more than ``english`` itself
(docs/publish.md, "Parity")."""

TEXT_CONFIG_DDL = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = '{TEXT_CONFIG}' AND pg_ts_config_is_visible(oid)) THEN
        CREATE TEXT SEARCH DICTIONARY kb_english_stop (TEMPLATE = simple, STOPWORDS = english);
        CREATE TEXT SEARCH CONFIGURATION {TEXT_CONFIG} (COPY = english);
        ALTER TEXT SEARCH CONFIGURATION {TEXT_CONFIG} ALTER MAPPING FOR asciiword, word, numword, asciihword,
            hword, numhword, hword_asciipart, hword_part, hword_numpart WITH kb_english_stop;
    END IF;
END
$$"""
VIEW = "kb_chunks"
PASSAGES_VIEW = "kb_passages"
PUBLICATIONS = "kb_publications"
LOCK_KEY = 0x6B62_7261_7970_6770  # pg_advisory_xact_lock key: one publisher at a time ("kbraypgp")

PUBLICATIONS_DDL = f"""
CREATE TABLE IF NOT EXISTS {PUBLICATIONS} (
    table_name text PRIMARY KEY,
    generation_id text NOT NULL,
    segment integer NOT NULL,
    embedder_fp text NOT NULL,
    dim integer NOT NULL,
    rows bigint NOT NULL,
    passages bigint,
    catalog_versions jsonb NOT NULL,
    text_config text NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    publish_seconds double precision,
    live boolean NOT NULL DEFAULT false,
    UNIQUE (generation_id, segment)
)"""
PUBLICATIONS_UPGRADE = f"""
ALTER TABLE {PUBLICATIONS} ADD COLUMN IF NOT EXISTS passages bigint"""
"""A ``kb_publications`` made before passage tables gains the count; its rows keep NULL until their
publication is published again (which writes the passage table, kb_ray/publish/postgres.py)."""

COLUMNS = (  # (name, Postgres type) in COPY order; tsv and tie_key are generated from the others
    ("chunk_id", "text"), ("document_id", "text"), ("version_id", "text"), ("title", "text"), ("uri", "text"),
    ("file_name", "text"), ("collection", "text"), ("tags", "text[]"), ("mime", "text"),
    ("created_at", "timestamptz"), ("acl", "text[]"), ("metadata", "jsonb"), ("text", "text"),
    ("heading", "text"), ("heading_path", "text[]"), ("spans", "jsonb"), ("pages", "integer[]"),
    ("regions", "jsonb"), ("ordinal", "integer"), ("chunk_kind", "text"), ("embedding", "vector"),
)


def create_table(table: str, dim: int) -> sql.Composed:
    columns = [sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(f"vector({int(dim)})" if kind == "vector"
                                                                     else kind)) for name, kind in COLUMNS]
    tsv = sql.SQL(
        "tsv tsvector GENERATED ALWAYS AS ("
        "setweight(to_tsvector({cfg}::regconfig, coalesce(heading, '') || ' ' || text), 'A') || "
        "setweight(to_tsvector({cfg}::regconfig, regexp_replace(coalesce(file_name, ''), '[^[:alnum:]]+', ' ', 'g')),"
        " 'B')) STORED").format(cfg=sql.Literal(TEXT_CONFIG))
    return sql.SQL("CREATE TABLE {} ({}, {}, {}, PRIMARY KEY (chunk_id))").format(
        sql.Identifier(table), sql.SQL(", ").join(columns), tsv, sql.SQL(TIE_KEY_COLUMN))


TIE_KEY_COLUMN = ("tie_key text COLLATE \"C\" GENERATED ALWAYS AS "
                  "(kb_tie_key(heading_path, text, file_name, ordinal)) STORED")
"""kb-ray's order for equal scores (kb_ray/index/channels.py ``tie_key``), so ties in the published
ranking fall as kb-ray's do and do not depend on where the corpus lived (chunk ids follow the
source path). Byte order (``C``): UTF-8's byte order is Python's code point order."""


def add_tie_key(table: str) -> sql.Composed:
    """A publication written before tie keys gains the column (Postgres computes it for every row)."""
    return sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}").format(sql.Identifier(table), sql.SQL(TIE_KEY_COLUMN))


def create_indexes(table: str) -> list[sql.Composed]:
    """Built after the COPY (one pass over the rows instead of one insert per row)."""
    name = sql.Identifier
    return [
        sql.SQL("CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops)").format(
            name(f"{table}_embedding_hnsw"), name(table)),
        sql.SQL("CREATE INDEX {} ON {} USING gin (tsv)").format(name(f"{table}_tsv_gin"), name(table)),
        sql.SQL("CREATE INDEX {} ON {} (document_id)").format(name(f"{table}_document"), name(table)),
        sql.SQL("CREATE INDEX {} ON {} (collection)").format(name(f"{table}_collection"), name(table)),
        sql.SQL("CREATE INDEX {} ON {} USING gin (tags)").format(name(f"{table}_tags_gin"), name(table)),
    ]


PASSAGE_COLUMNS = (("chunk_id", "text"), ("passage", "integer"), ("embedding", "vector"))  # COPY order


def create_passage_table(passages: str, dim: int) -> sql.Composed:
    """``passage``: the passage's number within its chunk (0, 1, ... in text order)."""
    return sql.SQL("CREATE TABLE {} (chunk_id text NOT NULL, passage integer NOT NULL, "
                   "embedding vector({}) NOT NULL, PRIMARY KEY (chunk_id, passage))").format(
        sql.Identifier(passages), sql.SQL(str(int(dim))))


def create_passage_indexes(passages: str, table: str) -> list[sql.Composed]:
    """Built after the COPY, like the chunk table's; the foreign key too (one join, not a check per row)."""
    name = sql.Identifier
    return [
        sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} FOREIGN KEY (chunk_id) REFERENCES {} (chunk_id) "
                "ON DELETE CASCADE").format(name(passages), name(f"{passages}_chunk_fk"), name(table)),
        sql.SQL("CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops)").format(
            name(f"{passages}_embedding_hnsw"), name(passages)),
    ]


def switch_view(table: str, passages: str) -> list[sql.Composed]:
    """Drop and recreate both views (a new table may have another vector dimension): one
    transaction, so readers see the old views or the new ones, never none or a mix."""
    views = ((VIEW, table), (PASSAGES_VIEW, passages))
    return [*(sql.SQL("DROP VIEW IF EXISTS {}").format(sql.Identifier(view)) for view, _ in views),
            *(sql.SQL("CREATE VIEW {} AS SELECT * FROM {}").format(sql.Identifier(view), sql.Identifier(source))
              for view, source in views),
            sql.SQL("UPDATE {} SET live = (table_name = %s)").format(sql.Identifier(PUBLICATIONS))]


FILTER_KEYS = ("collection", "document_ids", "tags_any", "tags_all", "mime", "created_after", "created_before",
               "metadata", "acl_any")

TEXT_LIST_FUNCTION = """
CREATE OR REPLACE FUNCTION kb_text_list(value jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof(value)
        WHEN 'string' THEN ARRAY[value #>> '{}']
        WHEN 'array' THEN ARRAY(SELECT jsonb_array_elements_text(value))
    END
$$"""

FILTER_CHECK_FUNCTION = """
CREATE OR REPLACE FUNCTION kb_check_filter(filter jsonb, filterable_metadata text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    allowed text[] := ARRAY[%(keys)s];
    key text;
BEGIN
    IF filter IS NULL THEN RETURN; END IF;
    IF jsonb_typeof(filter) <> 'object' THEN
        RAISE EXCEPTION 'filter must be a JSON object of %%', array_to_string(allowed, ', ')
            USING ERRCODE = '22023';
    END IF;
    FOR key IN SELECT jsonb_object_keys(filter) LOOP
        IF NOT key = ANY(allowed) THEN
            RAISE EXCEPTION 'unknown filter field %%; allowed fields: %%', key, array_to_string(allowed, ', ')
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    FOREACH key IN ARRAY ARRAY['collection', 'mime'] LOOP
        IF filter ? key AND jsonb_typeof(filter -> key) NOT IN ('string', 'array') THEN
            RAISE EXCEPTION 'filter %% must be a string or a list of strings', key USING ERRCODE = '22023';
        END IF;
    END LOOP;
    FOREACH key IN ARRAY ARRAY['document_ids', 'tags_any', 'tags_all', 'acl_any'] LOOP
        IF filter ? key AND jsonb_typeof(filter -> key) <> 'array' THEN
            RAISE EXCEPTION 'filter %% must be a list of strings', key USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF filter ? 'metadata' THEN
        IF jsonb_typeof(filter -> 'metadata') <> 'object' THEN
            RAISE EXCEPTION 'filter metadata must be an object of field to value' USING ERRCODE = '22023';
        END IF;
        FOR key IN SELECT jsonb_object_keys(filter -> 'metadata') LOOP
            IF NOT key = ANY(filterable_metadata) THEN
                RAISE EXCEPTION 'metadata field %% is not filterable; allowed metadata fields: %%', key,
                    coalesce(nullif(array_to_string(filterable_metadata, ', '), ''),
                             'none (declare them in index.filterable_metadata)') USING ERRCODE = '22023';
            END IF;
        END LOOP;
    END IF;
END
$$"""

FILTER_MATCH_FUNCTION = """
CREATE OR REPLACE FUNCTION kb_filter_match(filter jsonb, collection text, document_id text, tags text[], mime text,
                                           created_at timestamptz, acl text[], metadata jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE SET timezone = 'UTC' AS $$
    SELECT filter IS NULL OR (
        (NOT filter ? 'collection' OR collection = ANY(kb_text_list(filter -> 'collection')))
        AND (NOT filter ? 'document_ids' OR document_id = ANY(kb_text_list(filter -> 'document_ids')))
        AND (NOT filter ? 'tags_any' OR tags && kb_text_list(filter -> 'tags_any'))
        AND (NOT filter ? 'tags_all' OR tags @> kb_text_list(filter -> 'tags_all'))
        AND (NOT filter ? 'mime' OR mime = ANY(kb_text_list(filter -> 'mime')))
        AND (NOT filter ? 'created_after' OR created_at > (filter ->> 'created_after')::timestamptz)
        AND (NOT filter ? 'created_before' OR created_at < (filter ->> 'created_before')::timestamptz)
        AND (NOT filter ? 'acl_any' OR cardinality(acl) = 0 OR acl && kb_text_list(filter -> 'acl_any'))
        AND (NOT filter ? 'metadata' OR NOT EXISTS (
            SELECT 1 FROM jsonb_each(filter -> 'metadata') AS wanted(field, value)
            WHERE NOT coalesce(metadata -> wanted.field = ANY(
                CASE jsonb_typeof(wanted.value) WHEN 'array' THEN ARRAY(SELECT jsonb_array_elements(wanted.value))
                     ELSE ARRAY[wanted.value] END), false)))
    )
$$"""

TIE_KEY_FUNCTION = r"""
CREATE OR REPLACE FUNCTION kb_tie_key(heading_path text[], body text, file_name text, ordinal integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT left(encode(sha256(convert_to(coalesce(array_to_string(heading_path, E'\x1f'), '') || E'\x1e'
                                         || coalesce(body, ''), 'UTF8')), 'hex'), 16)
           || '|' || coalesce(file_name, '') || '|' || lpad(coalesce(ordinal, 0)::text,
                                                            greatest(9, length(coalesce(ordinal, 0)::text)), '0')
$$"""
"""kb_ray/index/channels.py ``tie_key`` in SQL: 16 hex of the SHA-256 of the heading path and text,
the file name, the ordinal in 9 digits (tests/publish/test_postgres.py compares them row by row)."""

HYBRID_FUNCTION = """
CREATE OR REPLACE FUNCTION kb_hybrid_search(query_vec vector, query_text text, k integer DEFAULT 10,
                                            filter jsonb DEFAULT '{}', candidates integer DEFAULT 100,
                                            rrf_k integer DEFAULT 60)
RETURNS TABLE (chunk_id text, document_id text, version_id text, title text, uri text, text text, pages integer[],
               spans jsonb, regions jsonb, score double precision, dense_rank integer, lexical_rank integer)
LANGUAGE plpgsql STABLE
SET timezone = 'UTC' SET hnsw.ef_search = 200 %(iterative)s
AS $$
#variable_conflict use_column
DECLARE
    query tsquery;
    depth bigint := 2 * candidates::bigint;
    passage_chunks text[];
    passage_distances double precision[];
BEGIN
    PERFORM kb_check_filter(filter, ARRAY[%(metadata)s]::text[]);
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'k must be between 1 and 1000, got %%', k USING ERRCODE = '22023';
    END IF;
    -- OR of the query's lexemes, each quoted for the tsquery parser (backslash and quote escaped)
    query := (SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')
              FROM unnest(tsvector_to_array(to_tsvector('%(config)s'::regconfig, coalesce(query_text, '')))) lexeme
             )::tsquery;
    -- the nearest passage vectors of allowed chunks, deep enough to hold `candidates` distinct chunks
    -- (a chunk's passages may crowd the list) or every allowed passage, like MultiVectorShard
    WHILE query_vec IS NOT NULL LOOP
        SELECT array_agg(n.chunk_id), array_agg(n.distance) INTO passage_chunks, passage_distances
        FROM (SELECT p.chunk_id, p.embedding <=> query_vec AS distance
              FROM kb_passages p JOIN kb_chunks v ON v.chunk_id = p.chunk_id
              WHERE kb_filter_match(filter, v.collection, v.document_id, v.tags, v.mime, v.created_at, v.acl,
                                    v.metadata)
              ORDER BY p.embedding <=> query_vec LIMIT depth) n;
        EXIT WHEN depth IS NULL OR coalesce(cardinality(passage_chunks), 0) < depth
            OR (SELECT count(DISTINCT id) FROM unnest(passage_chunks) id) >= candidates;
        depth := 2 * depth;
    END LOOP;
    RETURN QUERY
    -- equal distances, ranks and scores fall in kb-ray's tie order (tie_key), then by chunk id
    WITH dense AS (  -- a chunk's distance: the least of its own vector's and its passages'
        SELECT b.chunk_id, row_number() OVER (ORDER BY b.distance, b.tie_key, b.chunk_id)::integer AS rank
        FROM (SELECT best.chunk_id, best.distance, t.tie_key
              FROM (SELECT u.chunk_id, min(u.distance) AS distance
                    FROM ((SELECT v.chunk_id, v.embedding <=> query_vec AS distance FROM kb_chunks v
                           WHERE query_vec IS NOT NULL
                             AND kb_filter_match(filter, v.collection, v.document_id, v.tags, v.mime, v.created_at,
                                                 v.acl, v.metadata)
                           ORDER BY v.embedding <=> query_vec LIMIT candidates)
                          UNION ALL
                          SELECT * FROM unnest(passage_chunks, passage_distances) AS p(chunk_id, distance)) u
                    GROUP BY u.chunk_id) best
              JOIN kb_chunks t ON t.chunk_id = best.chunk_id
              ORDER BY 2, 3, 1 LIMIT candidates) b
    ), lexical AS (
        SELECT c.chunk_id, row_number() OVER (ORDER BY c.rank DESC, c.tie_key, c.chunk_id)::integer AS rank
        FROM (SELECT v.chunk_id, ts_rank('{0, 0, 0.5, 1}', v.tsv, query, %(normalization)s) AS rank, v.tie_key
              FROM kb_chunks v
              WHERE query IS NOT NULL AND v.tsv @@ query
                AND kb_filter_match(filter, v.collection, v.document_id, v.tags, v.mime, v.created_at, v.acl,
                                    v.metadata)
              ORDER BY 2 DESC, 3, v.chunk_id LIMIT candidates) c
    ), fused AS (
        SELECT coalesce(d.chunk_id, l.chunk_id) AS chunk_id, d.rank AS dense_rank, l.rank AS lexical_rank,
               coalesce(1.0 / (rrf_k + d.rank), 0) + coalesce(1.0 / (rrf_k + l.rank), 0) AS score
        FROM dense d FULL OUTER JOIN lexical l ON l.chunk_id = d.chunk_id
    )
    SELECT v.chunk_id, v.document_id, v.version_id, v.title, v.uri, v.text, v.pages, v.spans, v.regions,
           f.score::double precision, f.dense_rank, f.lexical_rank
    FROM fused f JOIN kb_chunks v ON v.chunk_id = f.chunk_id
    ORDER BY f.score DESC, v.tie_key, v.chunk_id
    LIMIT k;
END
$$"""

RANK_NORMALIZATION = 1  # ts_rank: divide by 1 + log(document length), a length normalization like BM25's


def function_ddl(*, filterable_metadata: list[str], iterative_scan: bool) -> list[str]:
    """The functions, with the publisher's declared metadata fields; pgvector >= 0.8 scans HNSW
    iteratively so a filter never shortens the dense candidates (filters before top-k)."""
    quoted = ", ".join(_literal(name) for name in filterable_metadata)
    hybrid = HYBRID_FUNCTION % {
        "metadata": quoted, "config": TEXT_CONFIG, "normalization": RANK_NORMALIZATION,
        "iterative": "SET hnsw.iterative_scan = strict_order" if iterative_scan else ""}
    check = FILTER_CHECK_FUNCTION % {"keys": ", ".join(_literal(key) for key in FILTER_KEYS)}
    return [TEXT_LIST_FUNCTION, TIE_KEY_FUNCTION, check, FILTER_MATCH_FUNCTION, hybrid]


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
