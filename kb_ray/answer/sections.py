"""Named documents and their section trees, read from the catalog (summary and compare modes).

``resolve_documents`` turns the request's ``documents`` (ids, titles, URIs or file names) into
active documents with their active version's chunks, looking only at the documents the
caller's :class:`~kb_ray.auth.scope.ReadScope` sees: a document outside it is as unknown as one
that never existed (same 404, same message). A reference that names no such document, or
several, raises :class:`DocumentReferenceError` listing candidates from inside the scope, each
by id and name (title or file name), never by URI: a local document's URI is a server path.

A document's section tree comes from its chunks' ``heading_path`` (in ordinal order): the
prefix every chunk shares (the document's title heading) is dropped, chunks are grouped by
their top-level heading, chunks before the first heading form an "Overview" group, tiny
groups are folded into a neighbour and, while there are more than ``max_sections``, the two
adjacent groups with the fewest tokens together are merged (titles joined with "; ").
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from kb_ray.auth.scope import ReadScope
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import open_sql_session
from kb_ray.errors import KbRayError
from kb_ray.search.documents import document_view

OVERVIEW = "Overview"
MIN_SECTION_TOKENS = 40  # a top-level group under this is folded into its neighbour
_ACTIVE_SQL = """
SELECT document_id, title, uri, key, collection, acl FROM active_documents ORDER BY document_id
"""
_ELEMENTS_SQL = """
SELECT span_start, span_end, regions FROM elements
WHERE version_id = $version_id AND layer = 'body' AND span_start IS NOT NULL ORDER BY span_start
"""
_NUMBERING = re.compile(r"^\s*(?:[0-9]+(?:\.[0-9]+)*|[IVXLC]+\.|[A-Z]\.)\s+")


class DocumentReferenceError(KbRayError):
    """A named document is unknown, ambiguous or has no active version; ``candidates`` lists
    ``{"document_id", "title", "name"}`` of the documents in the caller's scope it could have
    meant (``name``: the title, else the file name); ``not_found`` (HTTP 404, else 400) when no
    active document in the scope has that name."""

    def __init__(self, message: str, candidates: list[dict[str, Any]], *, not_found: bool = False) -> None:
        self.candidates = candidates
        self.not_found = not_found
        listed = "; ".join(f"{c['document_id']} ({c['name']})" for c in candidates)
        super().__init__(f"{message}; candidates: {listed}" if candidates else message)


@dataclass(frozen=True)
class Section:
    """One top-level section (or several merged): its title, the headings it covers and the
    ordinals of its chunks in the active version."""

    title: str
    headings: tuple[str, ...]
    ordinals: tuple[int, ...]
    tokens: int


@dataclass
class DocumentOutline:
    """An active document, its active version's chunks (document_view's shape) and the body
    elements' spans and regions (for the page and box of a passage)."""

    document_id: str
    version_id: str
    title: str | None
    uri: str | None
    chunks: list[dict[str, Any]]
    elements: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.title or PurePosixPath(self.uri or self.document_id).name


def resolve_documents(catalog: DeltaCatalog, references: list[str], *,
                      scope: ReadScope) -> list[DocumentOutline]:
    """The active documents in ``scope`` the references name, in order (a document named twice once)."""
    return [_outline(catalog, document_id)
            for document_id in resolve_document_ids(catalog, references, scope=scope)]


def resolve_document_ids(catalog: DeltaCatalog, references: list[str], *, scope: ReadScope) -> list[str]:
    """The ids of the active documents in ``scope`` the references (ids or titles) name, in
    order, once each; documents outside the scope are never matched, listed or mentioned."""
    if not references:
        raise DocumentReferenceError("this mode needs 'documents': ids or titles of the documents to use", [])
    active = [doc for doc in _active_documents(catalog) if scope.sees(doc)]
    ids: list[str] = []
    for reference in references:
        document_id = _resolve_one(reference, active, catalog, scope)
        if document_id not in ids:
            ids.append(document_id)
    return ids


def _active_documents(catalog: DeltaCatalog) -> list[dict[str, Any]]:
    connection = open_sql_session(catalog)
    try:
        result = connection.execute(_ACTIVE_SQL)
        names = [column[0] for column in result.description]
        return [dict(zip(names, row)) for row in result.fetchall()]
    finally:
        connection.close()


def _resolve_one(reference: str, active: list[dict[str, Any]], catalog: DeltaCatalog, scope: ReadScope) -> str:
    wanted = reference.strip()
    if any(doc["document_id"] == wanted for doc in active):
        return wanted
    matches = _matches(wanted, active)
    if len(matches) == 1:
        return matches[0]["document_id"]
    if matches:
        raise DocumentReferenceError(f"document {reference!r} is ambiguous: {len(matches)} active documents match "
                                     "it; name one by its id", [_candidate(d) for d in matches])
    if scope.sees(document_view(catalog, wanted)):
        raise DocumentReferenceError(f"document {reference!r} has no active version (deleted or never committed)", [],
                                     not_found=True)
    raise DocumentReferenceError(f"no active document you may read is named {reference!r} (by id, title, uri "
                                 "or file name)",
                                 [_candidate(d) for d in _close(wanted, active)], not_found=True)


def _matches(wanted: str, active: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Documents whose title, uri, key or file name equal the reference (case-insensitive);
    failing that, those whose title contains it."""
    folded = wanted.casefold()
    exact = [doc for doc in active if folded in {_fold(doc["title"]), _fold(doc["uri"]), _fold(doc["key"]),
                                                 _fold(PurePosixPath(doc["uri"] or "").name)}]
    return exact or [doc for doc in active if folded and folded in _fold(doc["title"])]


def _close(wanted: str, active: list[dict[str, Any]], limit: int = 5) -> list[dict[str, Any]]:
    by_name = {_fold(doc["title"] or PurePosixPath(doc["uri"] or "").name): doc for doc in active}
    close = difflib.get_close_matches(wanted.casefold(), list(by_name), n=limit, cutoff=0.3)
    return [by_name[name] for name in close] or active[:limit]


def _fold(value: str | None) -> str:
    return (value or "").strip().casefold()


def _candidate(doc: dict[str, Any]) -> dict[str, Any]:
    return {"document_id": doc["document_id"], "title": doc["title"],
            "name": doc["title"] or PurePosixPath(doc["uri"] or "").name or doc["document_id"]}


def _outline(catalog: DeltaCatalog, document_id: str) -> DocumentOutline:
    view = document_view(catalog, document_id)
    assert view is not None and view["active_version_id"], document_id  # resolved from active_documents
    return DocumentOutline(document_id=document_id, version_id=view["active_version_id"], title=view["title"],
                           uri=view["uri"], chunks=view["chunks"],
                           elements=_elements(catalog, view["active_version_id"]))


def _elements(catalog: DeltaCatalog, version_id: str) -> list[dict[str, Any]]:
    connection = open_sql_session(catalog)
    try:
        rows = connection.execute(_ELEMENTS_SQL, {"version_id": version_id}).fetchall()
    finally:
        connection.close()
    return [{"start": start, "end": end,
             "regions": [{"page": r["page"], "bbox": [round(r[c], 4) for c in ("x0", "y0", "x1", "y1")]}
                         for r in regions or []]} for start, end, regions in rows]


# -- the section tree ----------------------------------------------------------------------


def derive_sections(outline: DocumentOutline, *, max_sections: int) -> list[Section]:
    """The document's top-level sections, at most ``max_sections`` (see the module doc)."""
    groups = _top_level_groups(outline.chunks)
    groups = _fold_tiny(groups)
    while len(groups) > max_sections:
        i = min(range(len(groups) - 1), key=lambda j: groups[j].tokens + groups[j + 1].tokens)
        groups[i: i + 2] = [_join(groups[i], groups[i + 1], title=f"{groups[i].title}; {groups[i + 1].title}")]
    return groups


def _top_level_groups(chunks: list[dict[str, Any]]) -> list[Section]:
    paths = [list(chunk["heading_path"]) for chunk in chunks]
    root = _common_prefix([p for p in paths if p])
    if all(len(p) <= len(root) for p in paths):
        root = []  # every chunk sits at the root: keep its heading as the one section
    groups: list[Section] = []
    for chunk, path in zip(chunks, paths):
        top = path[len(root)] if len(path) > len(root) else None
        tokens = int(chunk["token_count"] or 0)
        if groups and groups[-1].headings == ((top,) if top else ()):
            groups[-1] = _join(groups[-1], Section("", (), (chunk["ordinal"],), tokens), title=groups[-1].title)
        else:
            groups.append(Section(top or OVERVIEW, (top,) if top else (), (chunk["ordinal"],), tokens))
    return groups


def _common_prefix(paths: list[list[str]]) -> list[str]:
    if not paths:
        return []
    prefix = paths[0]
    for path in paths[1:]:
        n = 0
        while n < min(len(prefix), len(path)) and prefix[n] == path[n]:
            n += 1
        prefix = prefix[:n]
    return prefix


def _fold_tiny(groups: list[Section]) -> list[Section]:
    """Fold each group under MIN_SECTION_TOKENS into the next one (the last into the previous);
    the neighbour keeps its title."""
    out: list[Section] = []
    pending: Section | None = None
    for group in groups:
        if pending is not None:
            group, pending = _join(pending, group, title=group.title), None
        if group.tokens < MIN_SECTION_TOKENS and len(groups) > 1:
            pending = group
            continue
        out.append(group)
    if pending is not None:
        last = out.pop() if out else None
        out.append(_join(last, pending, title=last.title) if last else pending)
    return out


def _join(first: Section, second: Section, *, title: str) -> Section:
    return Section(title=title, headings=first.headings + second.headings, ordinals=first.ordinals + second.ordinals,
                   tokens=first.tokens + second.tokens)


def normalize_heading(text: str) -> str:
    """A heading compared across documents: numbering dropped, case folded, words only."""
    return " ".join(re.findall(r"\w+", _NUMBERING.sub("", text).casefold()))


def heading_sections(outline: DocumentOutline) -> dict[str, tuple[int, ...]]:
    """Every heading of any level (normalized) -> the ordinals of the chunks under it."""
    out: dict[str, list[int]] = {}
    for chunk in outline.chunks:
        for heading in chunk["heading_path"]:
            key = normalize_heading(heading)
            if key and chunk["ordinal"] not in out.setdefault(key, []):
                out[key].append(chunk["ordinal"])
    return {key: tuple(ordinals) for key, ordinals in out.items()}


def display_heading(text: str) -> str:
    """A heading without its numbering ("3.1 Core hours" -> "Core hours")."""
    return _NUMBERING.sub("", text).strip() or text.strip()


def outline_headings(outline: DocumentOutline) -> list[tuple[int, str]]:
    """(depth, heading) of every heading under the document's root, in document order, once."""
    paths = [list(chunk["heading_path"]) for chunk in outline.chunks]
    root = _common_prefix([p for p in paths if p])
    if all(len(p) <= len(root) for p in paths):
        root = []
    seen: list[tuple[int, str]] = []
    for path in paths:
        for depth, heading in enumerate(path[len(root):]):
            if (depth, heading) not in seen:
                seen.append((depth, heading))
    return seen
