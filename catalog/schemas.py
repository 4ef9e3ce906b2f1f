"""The catalog contract: every Delta table of the knowledge base, as data.

Each table is declared once here, with its Arrow schema, its key columns, its partition
columns and one paragraph saying what a row means. ``kb_ray.catalog`` creates the tables
from these declarations and casts every write to them; nothing else defines a schema.

``SCHEMA_VERSION`` is written into every table's configuration
(``kb_ray.schema_version``) and into ``{kb_root}/_kb_ray_catalog.json``. Bump it for any
change an older reader could misread (a renamed, removed or retyped column), and ship a
migration with it.

Partitioning: no table is partitioned. Rows are keyed by content hashes, so any
partition column would either be high-cardinality (one tiny file per value) or a
collection name that makes small collections pay for many small files. Micro-batch
commits already keep files bounded; file statistics (numRecords, null counts) plus
OPTIMIZE/Z-order on key columns serve pruning better. Revisit if one collection grows
far beyond the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 1

TIMESTAMP = pa.timestamp("us", tz="UTC")
REGION = pa.struct(
    [
        pa.field("page", pa.int32()),
        pa.field("x0", pa.float32()),
        pa.field("y0", pa.float32()),
        pa.field("x1", pa.float32()),
        pa.field("y1", pa.float32()),
    ]
)
SPAN = pa.struct([pa.field("start", pa.int64()), pa.field("end", pa.int64())])


@dataclass(frozen=True)
class TableSpec:
    """One catalog table: name, schema, key and partition columns, and its meaning."""

    name: str
    schema: pa.Schema
    keys: tuple[str, ...]
    doc: str
    partition_by: tuple[str, ...] = ()


def _schema(*fields: tuple, keys: tuple[str, ...]) -> pa.Schema:
    """Build a schema from ``(name, type)`` pairs; key columns are non-nullable."""
    return pa.schema([pa.field(name, typ, nullable=name not in keys) for name, typ in fields])


def _table(name: str, keys: tuple[str, ...], doc: str, *fields: tuple) -> TableSpec:
    return TableSpec(name=name, schema=_schema(*fields, keys=keys), keys=keys, doc=doc)


SOURCES = _table(
    "sources",
    ("collection", "uri"),
    """The listing manifest: one row per source file ever seen in a collection. ``size``,
    ``mtime`` and ``raw_sha`` decide whether a file changed since the last run;
    ``last_seen_run`` and ``status`` ("present" | "vanished") let a sync mark files that
    disappeared from the listing without deleting their documents. ``meta_sha`` fingerprints
    the metadata from outside the file's bytes (source settings, sidecar): when only it
    changed, the document row is updated without a new version.""",
    ("collection", pa.string()), ("uri", pa.string()), ("key", pa.string()),
    ("size", pa.int64()), ("mtime", TIMESTAMP), ("raw_sha", pa.string()),
    ("document_id", pa.string()), ("last_seen_run", pa.string()), ("status", pa.string()),
    ("meta_sha", pa.string()),
)

DOCUMENTS = _table(
    "documents",
    ("document_id",),
    """One row per logical document (``document_id = H(collection, key)``), stable across
    versions. ``active_version_id`` is the hydration gate: a version is visible only while
    this pointer names it, so flipping it is the commit point of an ingest; null means
    tombstoned (``deleted_at`` then says when). ``tags``, ``acl`` (principals; empty: visible
    to every caller of the collection) and ``metadata_json`` come from the source settings,
    the file's front matter and its sidecar (kb_ray/ingest/metadata.py).""",
    ("document_id", pa.string()), ("collection", pa.string()), ("key", pa.string()),
    ("uri", pa.string()), ("title", pa.string()), ("mime", pa.string()),
    ("tags", pa.list_(pa.string())), ("metadata_json", pa.string()),
    ("active_version_id", pa.string()), ("created_at", TIMESTAMP),
    ("updated_at", TIMESTAMP), ("deleted_at", TIMESTAMP), ("acl", pa.list_(pa.string())),
)

VERSIONS = _table(
    "versions",
    ("version_id",),
    """One immutable parse of one document's raw bytes under one pipeline fingerprint
    (``version_id = H(document_id, raw_sha, pipeline_fp)``). Holds the canonical text
    every span points into, the fingerprints of each stage that produced it, status
    (staged | committed | failed | superseded), counts, and of a failed parse its
    ``reason`` (a code of kb_ray/outcomes.py) and ``error`` (display text "reason: detail").""",
    ("version_id", pa.string()), ("document_id", pa.string()), ("raw_sha", pa.string()),
    ("text_sha", pa.string()), ("pipeline_fp", pa.string()), ("parser", pa.string()),
    ("parser_fp", pa.string()), ("structurer_fp", pa.string()),
    ("chunker_fp", pa.string()), ("mime", pa.string()), ("status", pa.string()),
    ("canonical_text", pa.string()), ("title", pa.string()), ("n_pages", pa.int32()),
    ("n_elements", pa.int32()), ("n_chunks", pa.int32()), ("error", pa.string()),
    ("run_id", pa.string()), ("created_at", TIMESTAMP), ("reason", pa.string()),
)

ELEMENTS = _table(
    "elements",
    ("version_id", "element_id"),
    """The element tree of one version: kind (heading, paragraph, table, figure…), layer
    (body | furniture), nesting via ``parent_id``, a half-open character span into the
    version's canonical text (null for furniture, which is not in the text) and the page
    regions it covers (normalized bbox, origin top-left). ``attrs_json`` carries table
    cells, figure image sha and captions.""",
    ("version_id", pa.string()), ("element_id", pa.string()), ("ordinal", pa.int32()),
    ("kind", pa.string()), ("layer", pa.string()), ("level", pa.int32()),
    ("parent_id", pa.string()), ("span_start", pa.int64()), ("span_end", pa.int64()),
    ("text", pa.string()), ("regions", pa.list_(REGION)), ("attrs_json", pa.string()),
)

PAGES = _table(
    "pages",
    ("version_id", "page_no"),
    """One row per page of a paged version: size in points, whether it has a text layer
    (born-digital pages take the fast path) and the sha of its rendered image when one was
    rendered for captioning or page embedding.""",
    ("version_id", pa.string()), ("page_no", pa.int32()), ("width", pa.float32()),
    ("height", pa.float32()), ("has_text_layer", pa.bool_()), ("image_sha", pa.string()),
)

CHUNKS = _table(
    "chunks",
    ("chunk_id",),
    """Retrievable units with content identity (``chunk_id = H(document_id, chunker_fp,
    content_sha, occurrence)``): an unchanged paragraph keeps its row, embedding and
    caption across versions. ``embed_text_sha`` is the sha of the exact text the embedder
    sees (heading path + text) and joins to ``embeddings``.""",
    ("chunk_id", pa.string()), ("document_id", pa.string()), ("chunker_fp", pa.string()),
    ("text", pa.string()), ("content_sha", pa.string()),
    ("heading_path", pa.list_(pa.string())), ("token_count", pa.int32()),
    ("kind", pa.string()), ("embed_text_sha", pa.string()),
)

VERSION_CHUNKS = _table(
    "version_chunks",
    ("version_id", "chunk_id"),
    """Where a chunk sits in one version: its ordinal, its spans into that version's
    canonical text (several when a split table repeats its header row), the elements it
    was cut from, and its pages and regions — everything a citation needs.""",
    ("version_id", pa.string()), ("chunk_id", pa.string()), ("ordinal", pa.int32()),
    ("spans", pa.list_(SPAN)), ("element_ids", pa.list_(pa.string())),
    ("pages", pa.list_(pa.int32())), ("regions", pa.list_(REGION)),
)

CONCEPTS = _table(
    "concepts",
    ("version_id", "concept_id"),
    """The key terms and noun phrases of one version (kb_ray/index/concepts.py), one row per
    concept: ``concept_id = "cpt_" + H(key)`` where ``key`` is the normalized form (lowercase,
    Snowball-stemmed words, stopwords dropped; identifiers such as ``os.path.join`` or
    ``--verbose`` kept whole), so a concept is the same node in every version and document;
    ``label`` is its most frequent surface form in the version, ``kind`` term | phrase |
    identifier, ``chunks`` how many of the version's chunks mention it. Append-only per
    version, written with the version's other rows; ``extractor_fp`` names the extractor.""",
    ("version_id", pa.string()), ("concept_id", pa.string()), ("extractor_fp", pa.string()),
    ("key", pa.string()), ("label", pa.string()), ("kind", pa.string()), ("chunks", pa.int32()),
    ("mentions", pa.int32()),
)

MENTIONS = _table(
    "mentions",
    ("version_id", "chunk_id", "concept_id"),
    """Which chunk of a version mentions which concept, and how often: the edges of the
    chunk-concept graph an index generation builds for search mode ``graph``
    (kb_ray/index/graph.py). Append-only per version, like ``version_chunks``.""",
    ("version_id", pa.string()), ("chunk_id", pa.string()), ("concept_id", pa.string()),
    ("extractor_fp", pa.string()), ("count", pa.int32()),
)

EMBEDDINGS = _table(
    "embeddings",
    ("embedder_fp", "embed_text_sha"),
    """Dense vectors keyed by embedder fingerprint and the sha of the embedded text. It is
    also the embedding cache: a text already embedded by the same embedder is never
    embedded again, and a new embedder fingerprint is a new, separate set of rows.""",
    ("embedder_fp", pa.string()), ("embed_text_sha", pa.string()), ("dim", pa.int32()),
    ("vector", pa.list_(pa.float32())),
)

PAGE_EMBEDDINGS = _table(
    "page_embeddings",
    ("embedder_fp", "image_sha"),
    """Multivector page embeddings (ColQwen family) keyed by page-embedder fingerprint and
    the sha256 of the rendered page PNG (``pages.image_sha``; the PNG itself lives in the
    blob store under ``blobs/pages/<sha[:2]>/<sha>.png``). ``vectors`` holds
    ``n_vectors x dim`` float16 values, row-major little-endian, as one binary blob:
    Delta Lake has no half-float type, so a list column would have to be float32 (twice
    the bytes). It is also the page-embedding cache: a page image already embedded by
    the same embedder is never embedded again.""",
    ("embedder_fp", pa.string()), ("image_sha", pa.string()), ("n_vectors", pa.int32()),
    ("dim", pa.int32()), ("dtype", pa.string()), ("vectors", pa.binary()),
)

ENRICHMENTS = _table(
    "enrichments",
    ("enricher_fp", "input_sha"),
    """Model-made additions to documents, keyed by enricher fingerprint (model, prompt,
    sampling settings) and the sha256 of the input it saw; today a VLM caption of a figure
    crop (the PNG lives in the blob store under ``blobs/figures/<sha[:2]>/<sha>.png``).
    Content-addressed like the embeddings: the same crop under the same enricher is
    captioned once, whatever document it appears in. A failed or timed-out call keeps
    its row with ``status = 'failed'`` and the ``error``; a later success replaces it.
    ``prompt_tokens``, ``completion_tokens``, ``seconds`` and ``cost_usd`` record the
    usage of that one call. The caption reaches search as a chunk of its own
    (``chunks.kind = 'figure_description'``) placed at its figure's page and box; it never
    replaces the document's text. ``kind = 'chunk_context'``: the context of a chunk that
    a contextual index generation embeds and BM25-indexes before the chunk's text
    (kb_ray/index/contextual.py, docs/contextual.md), extractive or written by the
    configured answer generator; ``input_sha`` is the sha256 of what its writer saw. They
    are written by ``build-index`` with ``index.contextual``, not by the ingest, and are a
    cache: ``purge`` deletes them (and their vectors) and the next contextual build writes
    them again.""",
    ("enricher_fp", pa.string()), ("input_sha", pa.string()), ("kind", pa.string()),
    ("model", pa.string()), ("status", pa.string()), ("text", pa.string()), ("error", pa.string()),
    ("prompt_tokens", pa.int32()), ("completion_tokens", pa.int32()), ("seconds", pa.float64()),
    ("cost_usd", pa.float64()), ("run_id", pa.string()), ("created_at", TIMESTAMP),
)

INGEST_RUNS = _table(
    "ingest_runs",
    ("run_id",),
    """One row per ingest run: when it started and finished, its status, the resolved
    config and code version it ran with, and its report (documents seen/new/changed/
    skipped/failed, chunks new/reused, time per stage) as JSON. ``status``: ``running``
    (recorded at its start), ``succeeded``, ``failed_documents`` (finished, some documents
    failed), ``crashed`` (it stopped on an error and recorded it) or ``abandoned``: it was
    killed and recorded nothing more, and the next ingest to take the writer lease marked it
    so (``finished_at`` stays null; kb_ray/ingest/run.py).""",
    ("run_id", pa.string()), ("started_at", TIMESTAMP), ("finished_at", TIMESTAMP),
    ("status", pa.string()), ("config_json", pa.string()), ("code_version", pa.string()),
    ("report_json", pa.string()),
)

INGEST_LOG = _table(
    "ingest_log",
    ("run_id", "collection", "uri"),
    """Per-document outcome of a run, one row per source handled in a micro-batch:
    action (new | changed | unchanged | deleted | failed), status, ``reason`` (the failure's
    code, kb_ray/outcomes.py; null unless failed), ``error`` (display text: "reason:
    detail" of a failure, else the document's notes: parser fallback, page limits, failed
    captions), timings and chunk count. Append-only; the place to answer "why is this
    file not searchable".""",
    ("run_id", pa.string()), ("batch", pa.int32()), ("collection", pa.string()),
    ("uri", pa.string()), ("document_id", pa.string()), ("version_id", pa.string()),
    ("action", pa.string()), ("status", pa.string()), ("error", pa.string()),
    ("parse_seconds", pa.float64()), ("total_seconds", pa.float64()),
    ("n_chunks", pa.int32()), ("logged_at", TIMESTAMP), ("reason", pa.string()),
)

INDEX_GENERATIONS = _table(
    "index_generations",
    ("generation_id",),
    """One row per built index generation: its kind (hybrid; ``segment`` for a delta segment,
    id ``gen_…/seg_NNNN``, docs/indexes.md), the spec
    fingerprint, the catalog table versions it was built from (JSON: table → version, so
    it can be rebuilt identically), the manifest URI of its shards, status and stats.""",
    ("generation_id", pa.string()), ("kind", pa.string()), ("spec_fp", pa.string()),
    ("catalog_versions_json", pa.string()), ("manifest_uri", pa.string()),
    ("status", pa.string()), ("created_at", TIMESTAMP), ("stats_json", pa.string()),
)

ANSWERS = _table(
    "answers",
    ("answer_id",),
    """One row per answer the service or ``kb-ray ask`` gave (kb_ray/answer/log.py, written
    when ``answer.log`` is true): the question, mode and request (``filter_json``,
    ``request_json``), the generator (backend, model, fingerprint) and the index generation
    it searched, the chunk ids and documents it cited (``citations_json`` keeps each
    citation's quote, pages and regions, so the row still reads after a purge), how many
    sentences it had and how many verification flagged unsupported (``sentences_json``: each
    with its support and problem), the verification outcome (ok | repaired | flagged |
    refused), whether it abstained, latency, tokens, cost and the answer text, and ``tenant``:
    the API key's tenant the service answered (null with auth off and for ``kb-ray ask``), the
    only tenant whose feedback the answer takes (docs/security.md). Append-only;
    ``purge`` leaves it alone (it is a log, not part of the searchable corpus).""",
    ("answer_id", pa.string()), ("created_at", TIMESTAMP), ("query", pa.string()), ("mode", pa.string()),
    ("filter_json", pa.string()), ("request_json", pa.string()), ("generator_backend", pa.string()),
    ("generator_model", pa.string()), ("generator_fp", pa.string()), ("generation_id", pa.string()),
    ("cited_chunk_ids", pa.list_(pa.string())), ("cited_document_ids", pa.list_(pa.string())),
    ("citations_json", pa.string()), ("n_sentences", pa.int32()), ("n_unsupported", pa.int32()),
    ("sentences_json", pa.string()), ("verification", pa.string()), ("abstained", pa.bool_()),
    ("repaired", pa.bool_()), ("error", pa.string()), ("latency_ms", pa.float64()),
    ("timings_json", pa.string()), ("prompt_tokens", pa.int32()), ("completion_tokens", pa.int32()),
    ("cost_usd", pa.float64()), ("answer", pa.string()), ("tenant", pa.string()),
)

FEEDBACK = _table(
    "feedback",
    ("feedback_id",),
    """A person's verdict on one logged answer (``POST /v1/answers/{id}/feedback``): ``rating``
    is up | down | bad_retrieval (the passages were wrong, not the wording), with an optional
    ``comment``. Append-only: a second verdict on the same answer is a second row (the ready
    query ``answer_feedback`` shows them all). ``kb-ray eval export-drafts`` turns the down
    and bad_retrieval ones into eval-draft rows for a person to label.""",
    ("feedback_id", pa.string()), ("answer_id", pa.string()), ("created_at", TIMESTAMP),
    ("rating", pa.string()), ("comment", pa.string()),
)

LEASES = _table(
    "leases",
    ("name",),
    """Who holds a catalog-wide writer lease (today ``ingest``: one ingest, purge or maintain
    writes at a time; kb_ray/catalog/lease.py). The holder's ``token``, ``host``, ``pid`` and
    the process start time ``pid_start`` (so a reused pid is not mistaken for the holder),
    when it was taken and last renewed, and ``ttl_s``: a lease not renewed for that long, or
    whose holder process on this host is gone, is stale and is taken over. One row per held
    lease; released leases are deleted.""",
    ("name", pa.string()), ("token", pa.string()), ("holder", pa.string()), ("host", pa.string()),
    ("pid", pa.int64()), ("pid_start", pa.int64()), ("acquired_at", TIMESTAMP), ("renewed_at", TIMESTAMP),
    ("ttl_s", pa.float64()),
)

API_KEYS = _table(
    "api_keys",
    ("key_id",),
    """One row per API key of the search service (``kb-ray keys create``; kb_ray/auth/keys.py).
    Only ``secret_sha256`` (the SHA-256 of the key's secret part) is stored, never the key. The key
    belongs to ``tenant`` (whose collections it may see, ``serve.auth.tenants``), has a ``role``
    (reader | writer | admin) and ``principals`` forced into every request as ``acl_any``.
    ``revoked_at`` set means refused (``kb-ray keys revoke``); rows are never deleted.""",
    ("key_id", pa.string()), ("secret_sha256", pa.string()), ("tenant", pa.string()), ("role", pa.string()),
    ("principals", pa.list_(pa.string())), ("created_at", TIMESTAMP), ("revoked_at", TIMESTAMP),
)

UPLOADS = _table(
    "uploads",
    ("ingest_id", "file_no"),
    """The queue of files sent to ``POST /v1/documents`` (kb_ray/ingest/uploads.py, docs/upload.md):
    one row per file of an upload (``ingest_id``; ``file_no`` its place in the request), from the
    caller's ``tenant``, with its sanitized display ``name``, the document ``uri``
    (``upload://<collection>/<name>``) and ``document_id`` it becomes, the bytes' ``raw_sha`` (the
    blob ``blobs/raw/<sha[:2]>/<sha>``) and ``bytes``, the form's ``tags``, ``acl`` and
    ``metadata_json``. ``status`` is queued | running | done | failed; once ingested, ``run_id``
    (the ingest run that took it), ``action`` (new | changed | unchanged | failed), ``reason`` (a
    code of kb_ray/outcomes.py), ``detail`` and ``version_id`` say how it went.""",
    ("ingest_id", pa.string()), ("file_no", pa.int32()), ("tenant", pa.string()), ("collection", pa.string()),
    ("name", pa.string()), ("uri", pa.string()), ("document_id", pa.string()), ("raw_sha", pa.string()),
    ("bytes", pa.int64()), ("tags", pa.list_(pa.string())), ("acl", pa.list_(pa.string())),
    ("metadata_json", pa.string()), ("status", pa.string()), ("run_id", pa.string()), ("action", pa.string()),
    ("reason", pa.string()), ("detail", pa.string()), ("version_id", pa.string()), ("created_at", TIMESTAMP),
    ("updated_at", TIMESTAMP),
)

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        SOURCES, DOCUMENTS, VERSIONS, ELEMENTS, PAGES, CHUNKS, VERSION_CHUNKS, CONCEPTS, MENTIONS,
        EMBEDDINGS, PAGE_EMBEDDINGS, ENRICHMENTS, INGEST_RUNS, INGEST_LOG, INDEX_GENERATIONS,
        ANSWERS, FEEDBACK, LEASES, API_KEYS, UPLOADS,
    )
}
TABLE_NAMES: tuple[str, ...] = tuple(TABLES)
