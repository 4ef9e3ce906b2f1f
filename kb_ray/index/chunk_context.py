"""Chunk contexts for the contextual generation (``index.contextual``, docs/contextual.md).

A chunk's context is a short text that situates it in its document; the contextual
generation embeds and BM25-indexes ``context + "\\n" + chunk text`` instead of the chunk
alone (Anthropic's contextual-retrieval recipe). Two writers, each a pure function of
hydration rows (no Ray, no catalog):

* :class:`ExtractiveContextWriter` (the default, no model): document title, section heading
  path, position (``section 3 of 7, part 2 of 4``) and the lead sentences of the section
  (its summary in kb_ray/index/sections.py) when they are not the chunk's own;
* :class:`LlmContextWriter`: the recipe's prompt (an excerpt of the document, then the
  chunk) sent to the configured answer generator (kb_ray/answer/generators).

Every context is content-addressed: ``(enricher_fp, input_sha)`` where ``input_sha`` is the
sha256 of everything the writer saw (the extractive fields, or the prompt), so the same
input under the same writer is written once (kb_ray/index/contextual.py stores them in
``enrichments``, kind ``chunk_context``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import pyarrow as pa

from kb_ray import ids
from kb_ray.index.analyzer import TextAnalyzer
from kb_ray.index.channels import file_name
from kb_ray.index.sections import PATH_SEPARATOR, Section, document_sections
from kb_ray.index.tree import section_chunk

CONTEXT_KIND = "chunk_context"
CONTEXT_FORMAT = 1
MAX_CONTEXT_CHARS = 600  # an LLM context is cut here (whitespace folded)
_COLUMNS = ("chunk_id", "document_id", "version_id", "title", "uri", "text", "heading_path", "spans", "pages",
            "ordinal")


@dataclass(frozen=True)
class ChunkPlace:
    """Where one chunk sits in its document: what every writer starts from."""

    chunk_id: str
    title: str
    heading_path: tuple[str, ...]
    section: int  # 1-based, among the sections that hold chunks, in document order
    sections: int
    part: int  # 1-based, among the section's own chunks
    parts: int
    section_lead: str  # the section's lead sentences; "" when they are this chunk's own
    text: str
    document_text: str  # the version's chunks in order (for the LLM writer's excerpt)


@dataclass(frozen=True)
class ChunkContext:
    chunk_id: str
    input_sha: str
    text: str


def chunk_places(hydration: pa.Table, analyzer: TextAnalyzer) -> list[ChunkPlace]:
    """One :class:`ChunkPlace` per row of ``hydration`` (``HYDRATION_SCHEMA`` rows), in row order."""
    rows = hydration.select(list(_COLUMNS)).to_pylist()
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["version_id"], rows[i]["ordinal"] or 0))
    places: dict[int, ChunkPlace] = {}
    for _, group in groupby(order, key=lambda i: rows[i]["version_id"]):
        members = list(group)
        places.update(zip(members, _version_places([rows[i] for i in members], analyzer)))
    return [places[i] for i in range(len(rows))]


def _version_places(rows: list[dict[str, Any]], analyzer: TextAnalyzer) -> list[ChunkPlace]:
    first = rows[0]
    title = first["title"] or file_name(first["uri"]) or first["document_id"]
    sections = document_sections(first["document_id"], first["version_id"], title,
                                 [section_chunk(r) for r in rows], analyzer=analyzer)
    holding = [s for s in sections if s.chunk_ids]
    by_chunk = {cid: (n, s) for n, s in enumerate(holding, 1) for cid in s.chunk_ids}
    document_text = "\n\n".join(r["text"] or "" for r in rows)
    return [_place(r, title, by_chunk[r["chunk_id"]], len(holding), document_text) for r in rows]


def _place(row: dict[str, Any], title: str, where: tuple[int, Section], sections: int,
           document_text: str) -> ChunkPlace:
    number, section = where
    part = section.chunk_ids.index(row["chunk_id"]) + 1
    own_lead = section.summary and " ".join((row["text"] or "").split()).startswith(section.summary.rstrip(" …"))
    return ChunkPlace(chunk_id=row["chunk_id"], title=title, heading_path=tuple(row["heading_path"] or ()),
                      section=number, sections=sections, part=part, parts=len(section.chunk_ids),
                      section_lead="" if own_lead else section.summary, text=row["text"] or "",
                      document_text=document_text)


class ExtractiveContextWriter:
    """``Document: T. Section: A > B (section 3 of 7, part 2 of 4). Section begins: …``"""

    name, kind = "extractive", CONTEXT_KIND

    def __init__(self) -> None:
        self.fingerprint = ids.fingerprint(kind="enricher", name="ExtractiveChunkContext", version="1",
                                           config={"format": CONTEXT_FORMAT, "template": self.render(_EXAMPLE)})
        self.model = "extractive"

    def input_sha(self, place: ChunkPlace) -> str:
        fields = [place.title, list(place.heading_path), place.section, place.sections, place.part, place.parts,
                  place.section_lead]
        return ids.sha256_text(json.dumps(fields, ensure_ascii=False))

    def render(self, place: ChunkPlace) -> str:
        position = f"part {place.part} of {place.parts}"
        if place.heading_path:
            where = (f"Section: {PATH_SEPARATOR.join(place.heading_path)} "
                     f"(section {place.section} of {place.sections}, {position}).")
        else:
            where = f"({position})." if place.sections == 1 else f"(section {place.section} of {place.sections}, {position})."
        label = "Section" if place.heading_path else "Document"
        lead = f" {label} begins: {place.section_lead}" if place.section_lead else ""
        return f"Document: {place.title}. {where}{lead}"

    def contexts(self, places: list[ChunkPlace]) -> list[ChunkContext]:
        return [ChunkContext(p.chunk_id, self.input_sha(p), self.render(p)) for p in places]


_EXAMPLE = ChunkPlace(chunk_id="", title="T", heading_path=("A", "B"), section=3, sections=7, part=2, parts=4,
                      section_lead="L", text="", document_text="")

SYSTEM_PROMPT = "You write short contexts that situate a chunk of a document within that document."
USER_PROMPT = """<document>
{document}
</document>
Here is the chunk we want to situate within the whole document
<chunk>
{chunk}
</chunk>
Please give a short succinct context to situate this chunk within the overall document for the purposes of \
improving search retrieval of the chunk. Answer only with the succinct context and nothing else."""


def context_messages(place: ChunkPlace, *, document_chars: int) -> list[dict[str, str]]:
    """The recipe's prompt: the document's title and its first ``document_chars`` characters
    (with the chunk's section lead when that lies beyond them), then the chunk."""
    excerpt = place.document_text[:document_chars]
    if len(place.document_text) > document_chars:
        excerpt += "\n[…]"
        if place.section_lead:
            excerpt += f"\n{PATH_SEPARATOR.join(place.heading_path)}: {place.section_lead}\n[…]"
    document = f"# {place.title}\n{excerpt}"
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_PROMPT.format(document=document, chunk=place.text)}]


def clean_context(text: str) -> str:
    folded = " ".join(text.split())
    return folded if len(folded) <= MAX_CONTEXT_CHARS else folded[:MAX_CONTEXT_CHARS].rsplit(" ", 1)[0] + " …"
