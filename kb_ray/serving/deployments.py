"""Ray Serve deployments of the query service; the logic they call lives in ``kb_ray.search``.

* ``QueryEmbedder`` — batches concurrent queries into one embedding call.
* ``ShardSearcher`` — dense + lexical search with filters and the hydration gate over the
  live generation's shards (scatter-gather across shards inside one replica); follows
  ``CURRENT`` so a new generation is served without a restart. It also holds the
  generation's page index and, for ``page`` / ``hybrid+page`` modes, the page embedder:
  the query multivector is computed inside the replica (``embed_queries`` takes a batch,
  but requests are not yet batched across callers; a ``@serve.batch`` page-query
  deployment is the next step when page search gets traffic).
* ``RerankerDeployment`` — batched cross-encoder scoring (GPU when configured).
* ``SearchIngress`` — the FastAPI app: body size and read deadlines and the in-flight limit per client
  (kb_ray/serving/edge_limits.py), validation, fan-out, rerank, errors as 4xx (kb_ray/serving/http_guards.py);
  a search or embedding whose replica died is sent once more (``call_once_more_if_replica_died``); and
  ``POST /v1/answer`` (kb_ray/serving/answering.py over the same search path), logged to the
  ``answers`` table, and ``POST /v1/answers/{id}/feedback`` (kb_ray/answer/log.py); uploads
  (``POST /v1/documents``, ``GET /v1/ingests/{id}``) and ``DELETE /v1/documents/{id}``
  through kb_ray/serving/uploads.py (docs/upload.md); the read API
  (``GET /v1/documents``, ``/v1/documents/{id}/versions``, ``/v1/chunks/{id}``) and ``GET /metrics``
  (docs/documents_api.md); ``GET /v1/documents/{id}/tree`` (docs/tree.md); the browser viewer's routes,
  ``/v1/documents/{id}/text``,
  ``/v1/documents/{id}/pages/{n}.png`` (kb_ray/search/page_images.py) and the static ``/ui``
  (kb_ray/serving/viewer.py, docs/viewer.md). ``as_of`` searches go to a searcher pinned to a past point
  (kb_ray/search/as_of.py), 409 when no retained generation covers it.
"""

# No "from __future__ import annotations": FastAPI must see the real request types.
import asyncio
import logging
import time
from typing import Any

import numpy as np
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from ray import serve
from ray.exceptions import RayActorError

from kb_ray.auth.scope import ReadScope
from kb_ray.config import KbConfig, SearchSettings
from kb_ray.errors import FilterError, KbRayError, UploadError
from kb_ray.search.errors import SearchRequestError, query_too_long
from kb_ray.serving.api import AnswerRequest, FeedbackRequest, SearchRequest, merge_rerank
from kb_ray.serving.auth import AuthGate, BearerAuth, caller_of, install_gate
from kb_ray.serving.edge_limits import BodyGuard, BodyRules, ClientConcurrencyLimit, EdgePolicy
from kb_ray.serving.http_guards import add_error_handlers
from kb_ray.serving.metrics import CONTENT_TYPE, MetricsMiddleware, ServiceMetrics
from kb_ray.serving.uploads import UPLOAD_OPENAPI
from kb_ray.serving.viewer import viewer_asset, viewer_page

logger = logging.getLogger(__name__)
api = FastAPI(title="kb-ray search", version="1", description="Hybrid search with citations over a kb-ray catalog")
MAX_BODY_BYTES = 1 << 20  # a body over 1 MiB is refused with 413: by its content-length, or once that much arrived
UPLOAD_ROUTE = ("POST", "/v1/documents")  # its own body size and read deadline (serve.upload_*)
WARM_UP_QUERY = "warm-up query"
# body size and read deadlines, requests in flight per client (kb_ray/serving/edge_limits.py): defaults
# here, serve.* once SearchIngress starts
EDGE = EdgePolicy(BodyRules(max_bytes=MAX_BODY_BYTES))
api.add_middleware(BodyGuard, policy=EDGE)
api.add_middleware(ClientConcurrencyLimit, policy=EDGE)  # inside BearerAuth: counts by API key when auth is on
api.add_middleware(BearerAuth)  # a request without a valid key is refused first (docs/auth.md)
METRICS = ServiceMetrics()  # this process's series, in a registry of their own (GET /metrics)
api.add_middleware(MetricsMiddleware, metrics=METRICS, routes=lambda: api.router.routes)  # outermost: counts 401s too
add_error_handlers(api)  # 422 without echoing the input; why a body could not be read; 499 for a client gone


async def call_once_more_if_replica_died(method: Any, *args: Any) -> Any:
    """``await method.remote(*args)``, sent a second time when the replica that took it died
    (``RayActorError``: killed, OOM, node lost). Serve drops the dead replica from its routing,
    so the retry lands on a live one, or waits for the restarted one. Only for idempotent calls
    (embedding, search): a second failure is raised (the client sees a 500)."""
    try:
        return await method.remote(*args)
    except RayActorError as exc:
        logger.warning("a replica died during a request (%s); sending it once more", type(exc).__name__)
        return await method.remote(*args)


@serve.deployment
class QueryEmbedder:
    def __init__(self, config: KbConfig) -> None:
        from kb_ray.embedding.text import TextEmbedder

        self.embedder = TextEmbedder.from_settings(config.embedding, device=config.serve.embedder_device,
                                                   num_threads=config.search.query_threads)
        self.embedder.embed_texts([WARM_UP_QUERY])  # the first inference is slow: pay it before taking traffic

    def fingerprint(self) -> str:
        return self.embedder.fingerprint

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.004)
    async def embed(self, queries: list[str]) -> list[list[float]]:
        return [vector.tolist() for vector in self.embedder.embed_texts(queries)]


@serve.deployment
class ShardSearcher:
    def __init__(self, config: KbConfig) -> None:
        from kb_ray.search.as_of import AsOfSearchers
        from kb_ray.search.searcher import HybridSearcher

        self.searcher = HybridSearcher(config, reranker=None,  # reranking is its own deployment
                                       gate_max_age_s=config.search.gate_max_age_s)
        self.as_of = AsOfSearchers(self.searcher.catalog, kb_root=config.kb_root, make=self.searcher.at,
                                   storage_options=config.storage_options)
        self._refresh_every_s = config.index.refresh_interval_s  # new generations and delta segments
        self._checked = time.monotonic()
        self._warm_up()

    def _warm_up(self) -> None:
        """One hybrid search before the replica is RUNNING: it reads the hydration gate and the
        stored vectors hybrid evidence compares, which otherwise made a replacement replica's
        first requests (taken at once, under load) slow enough to time out
        (benchmarks/results/serve_load.md). The query vector is given, as the ingress gives
        every dense search one: a searcher replica never loads the text embedder (#38)."""
        dim = self.searcher.manifest.dim
        try:
            self.searcher.search(WARM_UP_QUERY, k=1, mode="hybrid", rerank=False, evidence="hybrid",
                                 query_vector=np.full(dim, dim ** -0.5, dtype=np.float32))
        except Exception:  # noqa: BLE001 - best effort: a real fault shows on the first request
            logger.warning("the searcher warm-up search failed", exc_info=True)

    def generation(self) -> dict[str, str]:
        manifest = self.searcher.manifest
        return {"generation": manifest.generation_id, "embedder_fp": manifest.embedder_fp}

    def search(self, request: dict[str, Any], query_vector: list[float] | None) -> dict[str, Any]:
        from kb_ray.search.as_of import AsOfError, NoCoveringGeneration

        if time.monotonic() - self._checked > self._refresh_every_s:
            self._checked = time.monotonic()
            self.searcher.refresh()
        if request.get("gate_floor"):  # a delete the ingress committed: never served from an older gate
            self.searcher.gate.at_least(request["gate_floor"])
        try:
            searcher = self._searcher_for(request.get("as_of"))
            result = searcher.search(request["query"], k=request["k"], mode=request["mode"],
                                     filters=request.get("filter"), query_vector=query_vector, rerank=False,
                                     context_chars=request.get("context_chars", 0),
                                     evidence=request.get("evidence"))
        except NoCoveringGeneration as exc:
            return {"error": str(exc), "status": 409}
        except (SearchRequestError, FilterError, AsOfError) as exc:
            return {"error": str(exc)}
        return {**result.to_dict(), **({"as_of": {"documents_version": searcher.gate.version}}
                                       if searcher is not self.searcher else {})}

    def _searcher_for(self, as_of: dict[str, Any] | None) -> Any:
        """The live searcher, or one pinned to the as-of point (same embedder as the live generation)."""
        if not as_of:
            return self.searcher
        return self.as_of.searcher_for(as_of, embedder_fp=self.searcher.manifest.embedder_fp)


@serve.deployment
class RerankerDeployment:
    """The configured reranker (kb_ray.search.rerank.reranker_from_settings): a local cross-encoder,
    or a client of a remote rerank server (whose batched requests go out concurrently)."""

    def __init__(self, settings: SearchSettings, device: str = "cpu") -> None:
        from kb_ray.search.rerank import reranker_from_settings

        self.reranker = reranker_from_settings(settings, device=device)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.004)
    async def score(self, requests: list[tuple[str, list[str]]]) -> list[list[float] | Exception]:
        """Scores per request, or the request's exception (a failed rerank falls back alone)."""
        many = getattr(self.reranker, "score_many", None)
        if many is not None:
            return await asyncio.to_thread(many, requests)
        return [self.reranker.score(query, passages) for query, passages in requests]


@serve.deployment
@serve.ingress(api)
class SearchIngress:
    def __init__(self, config: KbConfig, embedder: Any, searcher: Any, reranker: Any = None,
                 generator: Any = None) -> None:
        self.config = config
        self.embedder, self.searcher, self.reranker = embedder, searcher, reranker
        self.auth = AuthGate(config)
        install_gate(self.auth)
        from kb_ray.answer.log import AnswerLog
        from kb_ray.serving.answering import ServiceAnswerer

        self.answer_log = AnswerLog.for_config(config, batched=True)
        self.answerer = ServiceAnswerer(config, search=self._search_body, embed=self._embed_texts,
                                        generator_handle=generator,
                                        log=self.answer_log.append if config.answer.log else None)
        from kb_ray.serving.uploads import UploadService

        EDGE.configure(config.serve, upload_route=UPLOAD_ROUTE)
        self.uploads = UploadService(config)
        self._gate_floor = 0  # the documents version of this replica's latest delete

    @api.get("/healthz")
    async def healthz(self) -> dict[str, Any]:
        info = await self.searcher.generation.remote()
        embedder_fp = await self.embedder.fingerprint.remote()
        ok = embedder_fp == info["embedder_fp"]
        return {"ok": ok, "generation": info["generation"], "reranker": self.reranker is not None,
                **({} if ok else {"error": "the query embedder differs from the one the index was built with"})}

    @api.post("/v1/search")
    async def search(self, request: SearchRequest, http: Request) -> JSONResponse:
        request.filter = self._scope(http).filter(request.filter)
        return JSONResponse(await self._search(request))

    @api.post("/v1/answer")
    async def answer(self, request: AnswerRequest, http: Request) -> JSONResponse:
        """An answer with verified citations (docs/answers.md); 400 on an empty query, an unknown
        mode or an ambiguous document name, 404 when no document the key may read has a name.
        Every search and document lookup of every mode runs inside the key's scope."""
        from kb_ray.answer.sections import DocumentReferenceError

        self._check_query_length(request.query)
        try:
            return JSONResponse(await self.answerer.answer(request.model_dump(), scope=self._scope(http)))
        except DocumentReferenceError as exc:
            raise HTTPException(404 if exc.not_found else 400, str(exc)) from exc
        except KbRayError as exc:  # bad request (empty query, unknown mode) or generator set-up
            raise HTTPException(400, str(exc)) from exc

    @api.post("/v1/answers/{answer_id}/feedback")
    async def feedback(self, answer_id: str, request: FeedbackRequest, http: Request) -> JSONResponse:
        """A verdict (up | down | bad_retrieval, optional comment) on a logged answer; 404 for an
        unknown id or another tenant's answer."""
        from kb_ray.answer.log import UnknownAnswerError

        try:
            row = await asyncio.to_thread(self.answer_log.add_feedback, answer_id=answer_id, rating=request.rating,
                                          comment=request.comment, scope=self._scope(http))
        except UnknownAnswerError as exc:
            raise HTTPException(404, str(exc)) from exc
        return JSONResponse(row)

    @api.post("/v1/documents", status_code=202, openapi_extra=UPLOAD_OPENAPI)
    async def upload(self, http: Request) -> JSONResponse:
        """Queue multipart ``file`` parts for ingest (docs/upload.md): 202 with the ingest id; 400 a
        bad name or field, 403 a collection outside the tenant, 413 too large, 415 an unsupported type."""
        caller = caller_of(http)
        try:
            body = await self.uploads.upload(http, caller=caller, collections=self.auth.collections(caller))
        except UploadError as exc:
            raise HTTPException(exc.status, str(exc)) from exc
        return JSONResponse(body, status_code=202)

    @api.get("/v1/ingests/{ingest_id}")
    async def ingest(self, ingest_id: str, http: Request) -> JSONResponse:
        """An upload's status (queued | running | done | failed) and each file's outcome; 404 unknown."""
        status = await self.uploads.ingest(ingest_id, scope=self._scope(http))
        if status is None:
            raise HTTPException(404, f"no ingest {ingest_id}")
        return JSONResponse(status)

    @api.delete("/v1/documents/{document_id}")
    async def delete_document(self, document_id: str, http: Request) -> JSONResponse:
        """Tombstone a document, hidden from search at once; 404 unknown, deleted or another tenant's."""
        deleted = await self.uploads.delete(document_id, scope=self._scope(http))
        if deleted is None:
            raise HTTPException(404, f"no document {document_id}")
        # every later search carries the documents version the tombstone is in: each searcher
        # replica re-reads its gate if it is older (hidden at once, however many replicas)
        self._gate_floor = max(self._gate_floor, await asyncio.to_thread(self.uploads.documents_version))
        return JSONResponse(deleted)

    def _check_query_length(self, query: str) -> None:
        if len(query) > self.config.search.max_query_chars:
            raise HTTPException(400, query_too_long(len(query), self.config.search.max_query_chars))

    async def _search_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._search(SearchRequest(**body))

    async def _embed_texts(self, texts: list[str]) -> list[list[float]]:
        return list(await asyncio.gather(*(self.embedder.embed.remote(text) for text in texts)))

    async def _search(self, request: SearchRequest) -> dict[str, Any]:
        started = time.perf_counter()
        rerank = self.reranker is not None and request.rerank is not False
        if request.rerank and self.reranker is None:
            raise HTTPException(400, "rerank was requested but no reranker is configured "
                                     "(search.rerank_model_path or search.rerank_endpoint)")
        if not request.query.strip():
            raise HTTPException(400, "the query is empty: pass a non-empty query string")
        self._check_query_length(request.query)
        needs_vector = request.mode in ("dense", "hybrid", "hybrid+page", "tree", "graph")
        vector = await call_once_more_if_replica_died(self.embedder.embed, request.query) if needs_vector else None
        embed_ms = (time.perf_counter() - started) * 1000
        body = request.model_dump()
        body["k"] = max(request.k, self.config.search.rerank_candidates) if rerank else request.k
        body["gate_floor"] = self._gate_floor
        if not 1 <= request.k <= self.config.search.max_k:
            raise HTTPException(400, f"k must be between 1 and {self.config.search.max_k}, got {request.k}")
        result = await call_once_more_if_replica_died(self.searcher.search, body, vector)
        if "error" in result:
            raise HTTPException(result.get("status", 400), result["error"])  # 409: no generation covers as_of
        if rerank:
            result = await self._rerank(request, result)
        result["reranked"] = rerank and "rerank_error" not in result
        result["timing_ms"] = {"query_embed": round(embed_ms, 3), **result["timing_ms"],
                               "total_service": round((time.perf_counter() - started) * 1000, 3)}
        return result

    async def _rerank(self, request: SearchRequest, result: dict[str, Any]) -> dict[str, Any]:
        """The hits in the reranker's order; when the reranker fails (a remote server down or slow,
        a dead replica), the fused order with ``reranked: false`` and ``rerank_error``: never a 500."""
        started = time.perf_counter()
        hits = result["hits"]
        try:
            scores = await self.reranker.score.remote((request.query, [hit["text"] for hit in hits]))
            if isinstance(scores, Exception):
                raise scores
        except Exception as exc:  # noqa: BLE001 - any reranker failure falls back to the fused order
            logger.warning("rerank failed, keeping the fused order: %s", exc)
            result["hits"], result["rerank_error"] = hits[: request.k], str(exc)
        else:
            result["hits"] = merge_rerank(hits, scores, k=request.k)
        result["k"] = request.k
        result["timing_ms"]["rerank"] = round((time.perf_counter() - started) * 1000, 3)
        return result

    @api.get("/v1/documents/{document_id}")
    async def document(self, document_id: str, http: Request) -> JSONResponse:
        from kb_ray.search.documents import document_view

        view = await asyncio.to_thread(document_view, self._read_catalog(), document_id)
        self._check_visible(http, view, f"no document {document_id}")
        return JSONResponse(view)

    @api.get("/v1/documents/{document_id}/text")
    async def document_text(self, document_id: str, http: Request) -> JSONResponse:
        """The active version's canonical text, which every ``spans`` pair indexes (``text[start:end]``
        is the cited text); 404 for an unknown, deleted or foreign document."""
        from kb_ray.search.documents import document_text

        view = await asyncio.to_thread(document_text, self._read_catalog(), document_id)
        self._check_visible(http, view, f"no document {document_id}")
        return JSONResponse({key: view[key] for key in ("document_id", "version_id", "title", "mime", "text")})

    @api.get("/v1/documents/{document_id}/tree")
    async def document_tree(self, document_id: str, http: Request) -> JSONResponse:
        """The active version's section tree, nested (docs/tree.md); 404 for an unknown, deleted or
        foreign document."""
        from kb_ray.index.analyzer import TextAnalyzer
        from kb_ray.search.document_tree import document_tree

        analyzer = TextAnalyzer(stem=self.config.index.lexical_stem, identifiers=self.config.index.lexical_identifiers)
        view = await asyncio.to_thread(document_tree, self._read_catalog(), document_id, analyzer=analyzer)
        self._check_visible(http, view, f"no document {document_id}")
        return JSONResponse({key: view[key] for key in ("document_id", "version_id", "title", "uri", "tree")})

    @api.get("/v1/documents/{document_id}/pages/{page_no}.png")
    async def page_image(self, document_id: str, page_no: int, http: Request, dpi: int | None = None) -> Response:
        """Page ``page_no`` (1-based) of the active version as PNG (docs/viewer.md): 400 a dpi or pixel
        count over the limits, 404 an unknown, foreign or unpaginated document or page, 410 when the
        raw bytes are gone (source changed, not kept), 501 a PPTX without LibreOffice, 500 a failed
        conversion; an error's reason code is in the ``X-Kb-Ray-Reason`` header."""
        from kb_ray.search.page_images import PageImageError

        images = self._page_images()
        row = await asyncio.to_thread(images.page_row, document_id, page_no)
        self._check_visible(http, row, f"no document {document_id}")
        try:
            png = await asyncio.to_thread(images.png, row, page_no, dpi=dpi)
        except PageImageError as exc:
            raise HTTPException(exc.status, str(exc), headers={"X-Kb-Ray-Reason": exc.reason}) from exc
        return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=300"})

    def _page_images(self) -> Any:
        if getattr(self, "_images", None) is None:
            from kb_ray.search.page_images import PageImageLimits, PageImages

            self._images = PageImages(self._read_catalog(), limits=PageImageLimits.from_config(self.config))
        return self._images

    # -- the viewer's files (kb_ray/serving/viewer.py, docs/viewer.md): open, they hold no data

    @api.get("/ui", include_in_schema=False)
    async def ui_page(self) -> Response:
        return viewer_page()

    @api.get("/ui/doc/{document_id}", include_in_schema=False)
    async def ui_document(self, document_id: str) -> Response:
        return viewer_page()  # the script reads the id from the path

    @api.get("/ui/assets/{name}", include_in_schema=False)
    async def ui_asset(self, name: str) -> Response:
        return viewer_asset(name)

    # -- the read API and /metrics (docs/documents_api.md); logic in kb_ray/search/document_list.py,
    # chunk_view.py and kb_ray/serving/metrics.py

    @api.get("/v1/documents")
    async def documents(self, http: Request, collection: str | None = None, tags_any: str | None = None,
                        mime: str | None = None, limit: int = 100, cursor: str | None = None) -> JSONResponse:
        """A page of active documents in ``document_id`` order; comma-separated lists; the caller's
        scope narrows the filter exactly as it does a search. 400 on a bad cursor or a limit outside 1..1000."""
        from kb_ray.search.document_list import DocumentQueryError, list_documents

        raw = {key: value.split(",") for key, value in
               (("collection", collection), ("tags_any", tags_any), ("mime", mime)) if value}
        scoped = self._scope(http).filter(raw)
        try:
            page = await asyncio.to_thread(list_documents, self._read_catalog(), filter=scoped, limit=limit,
                                           cursor=cursor)
        except DocumentQueryError as exc:
            raise HTTPException(400, str(exc)) from exc
        return JSONResponse(page)

    @api.get("/v1/documents/{document_id}/versions")
    async def document_versions(self, document_id: str, http: Request) -> JSONResponse:
        """Every version of a document with its ``active`` flag; 404 for an unknown or foreign document."""
        from kb_ray.search.document_list import document_versions

        view = await asyncio.to_thread(document_versions, self._read_catalog(), document_id)
        self._check_visible(http, view, f"no document {document_id}")
        return JSONResponse({"document_id": document_id, "active_version_id": view["active_version_id"],
                             "versions": view["versions"]})

    @api.get("/v1/chunks/{chunk_id}")
    async def chunk(self, chunk_id: str, http: Request) -> JSONResponse:
        """The chunk inspector; ``lineage`` is for the live generation; 404 for a chunk of an unknown or
        foreign document."""
        view = await asyncio.to_thread(self._chunk_view, chunk_id)
        self._check_visible(http, view, f"no chunk {chunk_id}")
        return JSONResponse(view)

    @api.get("/metrics")
    async def metrics(self) -> Response:
        """Prometheus text: requests, latency, errors, the served generation and the document count."""
        from kb_ray.search.document_list import active_document_count

        METRICS.set_generation((await self.searcher.generation.remote())["generation"])
        METRICS.set_documents(await asyncio.to_thread(active_document_count, self._read_catalog()))
        return Response(METRICS.render(), media_type=CONTENT_TYPE)

    def _read_catalog(self) -> Any:
        """One catalog handle per replica for the read routes (its tables are updated on each use)."""
        if getattr(self, "_catalog", None) is None:
            from kb_ray.catalog.delta import DeltaCatalog

            self._catalog = DeltaCatalog.open(self.config.kb_root, storage_options=self.config.storage_options,
                                              create=False)
        return self._catalog

    def _chunk_view(self, chunk_id: str) -> dict[str, Any] | None:
        from kb_ray.search.chunk_view import chunk_view, live_manifest

        manifest = live_manifest(self.config.kb_root, storage_options=self.config.storage_options)
        return chunk_view(self._read_catalog(), chunk_id, manifest=manifest)

    def _scope(self, http: Request) -> ReadScope:
        """The one scope every read of this request goes through (docs/security.md)."""
        return self.auth.scope(caller_of(http))

    def _check_visible(self, http: Request, view: dict[str, Any] | None, missing: str) -> None:
        if not self._scope(http).sees(view):
            raise HTTPException(404, missing)  # another tenant's: 404, not 403


@api.exception_handler(KbRayError)
async def _kb_ray_error(_request, exc: KbRayError) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=400)
