"""One document, end to end and Ray-free: bytes → parse → structure → chunk.

:class:`DocumentProcessor` is what both ``kb-ray parse`` and the Ray Data parse stage call,
so a file parses the same way on a laptop and on a cluster.
"""

from __future__ import annotations

import time
from pathlib import PurePosixPath

from kb_ray import ids
from kb_ray.chunking.base import Chunker
from kb_ray.chunking.recursive import RecursiveChunker
from kb_ray.chunking.structural import StructuralChunker
from kb_ray.chunking.tokens import WordPieceCounter
from kb_ray.config import CaptionSettings, ChunkingSettings, ParseSettings
from kb_ray.embedding.model_files import resolve_model_path
from kb_ray.kept import KeptByKey
from kb_ray.model import DocumentVersion, Page
from kb_ray.outcomes import Reason, render_error
from kb_ray.parsing.base import ParseLimits
from kb_ray.parsing.blocks import ParseResult
from kb_ray.parsing.router import DEFAULT_ROUTES, DOCLING_PDF_ROUTES, ParserRouter
from kb_ray.structure.builder import StructureBuilder

REGEX_BUDGET = 200  # regex tokens: ~230 WordPiece for English prose, more for technical text
# wordpiece tokens per chunk, heading path included: about 850 characters on average on the realdocs
# corpus (the naive reference's windows are 800). Longer than MiniLM's 254-piece input: the chunk's
# own vector reads its start and its passage vectors (index.passage_chars) read all of it
# (benchmarks/results/eval.md, "Chunk budget 512").
WORDPIECE_BUDGET = 512


def build_chunker(settings: ChunkingSettings) -> Chunker:
    """The one chunker factory (the structural budget counted as ``settings.tokenizer`` says)."""
    if settings.strategy == "recursive":
        return RecursiveChunker(chunk_chars=settings.chunk_chars, overlap=settings.overlap)
    if settings.tokenizer == "regex":
        return StructuralChunker(max_tokens=structural_budget(settings))
    path = resolve_model_path(settings.tokenizer_path)
    return StructuralChunker(max_tokens=structural_budget(settings), counter=WordPieceCounter(path),
                             headings_in_budget=True)


def structural_budget(settings: ChunkingSettings) -> int:
    """The structural chunker's tokens per chunk: ``max_tokens``, else the tokenizer's default."""
    return settings.max_tokens or (REGEX_BUDGET if settings.tokenizer == "regex" else WORDPIECE_BUDGET)


def parse_routes(settings: ParseSettings) -> dict[str, list[str]]:
    """MIME type → parsers: from config, else the defaults (PDFs to ``docling_pdf`` first when it is enabled)."""
    return settings.routes or (DOCLING_PDF_ROUTES if settings.docling.enabled else DEFAULT_ROUTES)


_routers: KeptByKey[ParserRouter] = KeptByKey(size=2, on_drop=lambda router: router.close())  # by ParseSettings JSON


def shared_router(settings: ParseSettings) -> ParserRouter:
    """The router for ``settings``, shared by every processor of this process that has the same
    settings: its parser child (spawned, then importing Docling on the first Markdown, HTML or Office
    file: ~7 s on 2 cores) is started once, not once per ingest or per catalog. A router holds no
    catalog or document state; a third set of settings closes the least recently used one's child."""
    return _routers.get(settings.model_dump_json(), lambda: build_router(settings))[0]


def build_router(settings: ParseSettings) -> ParserRouter:
    """Routes from config, else the defaults (PDFs to ``docling_pdf`` first when it is enabled)."""
    memory = settings.max_memory_mb * 1024 * 1024 if settings.max_memory_mb else None
    pdfium_memory = settings.pdfium_memory_mb * 1024 * 1024 if settings.pdfium_memory_mb else None
    limits = ParseLimits(max_bytes=settings.max_bytes, max_pages=settings.max_pages, max_seconds=settings.max_seconds,
                         max_memory_bytes=memory, pdfium_memory_bytes=pdfium_memory, max_nesting=settings.max_nesting,
                         max_image_pixels=settings.max_image_pixels)
    routes = parse_routes(settings)
    options = {"pdf_text": {"figure_crops": settings.figure_crops, "crop_dpi": settings.figure_crop_dpi,
                            "tables": settings.pdf_tables, "table_seconds": settings.pdf_table_seconds},
               "docling_pdf": {"settings": settings.docling}}
    return ParserRouter(routes=routes, limits=limits, parser_options=options, isolate=settings.isolate)


class DocumentProcessor:
    """Parses, structures and chunks one document's bytes into a :class:`DocumentVersion`."""

    def __init__(self, *, parse: ParseSettings | None = None, chunking: ChunkingSettings | None = None,
                 captions: CaptionSettings | None = None) -> None:
        self.router = shared_router(parse or ParseSettings())
        self.structurer = StructureBuilder()
        self.chunker = build_chunker(chunking or ChunkingSettings())
        self.captions = captions if captions is not None and captions.enabled else None
        self._fingerprints: dict[str, str] | None = None

    @property
    def fingerprints(self) -> dict[str, str]:
        """Each stage's fingerprint (parser, structurer, chunker recorded on every version row;
        the caption enricher's when captions are on)."""
        if self._fingerprints is None:
            self._fingerprints = {"parser": self.router.fingerprint, "structurer": self.structurer.fingerprint,
                                  "chunker": self.chunker.fingerprint}
            if self.captions is not None:
                from kb_ray.enrich.captioners import caption_fingerprint

                self._fingerprints["enricher"] = caption_fingerprint(self.captions)
        return self._fingerprints

    @property
    def pipeline_fp(self) -> str:
        """Fingerprint of parse + structure + chunk (+ captions); part of every version id, so
        turning captions on or changing their model or prompt makes new versions."""
        f = self.fingerprints
        return ids.combine_fingerprints(f["parser"], f["structurer"], f["chunker"],
                                        *([f["enricher"]] if "enricher" in f else []))

    def process(self, data: bytes, *, collection: str, key: str, filename: str | None = None,
                mime: str | None = None, parsed_first: ParseResult | None = None) -> DocumentVersion:
        """``parsed_first``: the chain's first (model) parser already ran on these bytes elsewhere."""
        started = time.perf_counter()
        document_id = ids.document_id(collection=collection, key=key)
        raw_sha = ids.sha256_bytes(data)
        version_id = ids.version_id(document_id=document_id, raw_sha=raw_sha, pipeline_fp=self.pipeline_fp)
        parsed = self.router.parse(data, filename=filename or PurePosixPath(key).name, mime=mime, done=parsed_first)
        version = DocumentVersion(
            version_id=version_id, document_id=document_id, raw_sha=raw_sha, pipeline_fp=self.pipeline_fp,
            parser=parsed.parser, mime=parsed.mime, status="failed", error=parsed.error, reason=parsed.reason,
            detail=parsed.detail, fallback_from=parsed.fallback_from, title=parsed.title,
            pages=[Page(p.page_no, p.width, p.height, p.has_text_layer) for p in parsed.pages],
        )
        version.notes = list(parsed.notes)
        if parsed.status == "ok":
            self._structure_and_chunk(version, parsed.blocks)
            version.images = _referenced_images(version.elements, parsed.images)
        version.stats = {"parse_seconds": parsed.seconds, "total_seconds": time.perf_counter() - started,
                         "pages": float(len(parsed.pages))}
        return version

    def _structure_and_chunk(self, version: DocumentVersion, blocks: list) -> None:
        structured = self.structurer.build(blocks, version_id=version.version_id)
        if not structured.canonical_text.strip():
            version.reason, version.detail = Reason.EMPTY, "no body text once page headers and footers are set aside"
            version.error = render_error(version.reason, version.detail)
            return
        version.canonical_text = structured.canonical_text
        version.text_sha = ids.sha256_text(structured.canonical_text)
        version.elements = structured.elements
        version.chunks = self.chunker.chunk(structured.canonical_text, structured.elements,
                                            document_id=version.document_id)
        version.title = version.title or _first_heading(structured.elements)
        version.status = "staged"
        version.error, version.reason, version.detail = None, None, ""


def _referenced_images(elements: list, images: dict[str, bytes]) -> dict[str, bytes]:
    """The figure crops the element tree names (a crop of a dropped figure is not kept)."""
    names = {element.attrs.get("crop_sha") for element in elements if element.kind == "figure"}
    return {sha: png for sha, png in images.items() if sha in names}


def _first_heading(elements: list) -> str | None:
    return next((e.text for e in elements if e.kind in ("title", "heading") and e.span is not None), None)
