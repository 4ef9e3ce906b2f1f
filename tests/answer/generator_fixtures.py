"""Search hits over a real golden document (golden/sources/notes.txt), shaped as the search
service returns them (kb_ray/search/hits.py ``hydrate`` + evidence + confidence), for the
generator tests: each hit's ``quote`` is ``canonical[spans]`` of the file's text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NOTES = Path(__file__).resolve().parents[2] / "golden" / "sources" / "notes.txt"
TITLE = "Riverbend notes"


def notes_hits(paragraphs: tuple[int, ...] = (3, 4, 5)) -> list[dict[str, Any]]:
    """One hit per paragraph of notes.txt (in the order given), best first."""
    canonical = NOTES.read_text(encoding="utf-8")
    starts, offset = [], 0
    for paragraph in canonical.split("\n\n"):
        starts.append((offset, offset + len(paragraph)))
        offset += len(paragraph) + 2
    return [_hit(canonical, starts[i], rank, i) for rank, i in enumerate(paragraphs)]


def _hit(canonical: str, span: tuple[int, int], rank: int, ordinal: int) -> dict[str, Any]:
    quote = canonical[span[0]:span[1]]
    return {"kind": "chunk", "chunk_id": f"ch_notes_{ordinal}", "document_id": "doc_notes", "version_id": "ver_notes",
            "title": TITLE, "uri": "file://golden/sources/notes.txt", "collection": "default", "mime": "text/plain",
            "score": 1.0 / (rank + 1), "chunk_kind": "text", "generated": False, "text": quote, "quote": quote,
            "spans": [span], "pages": [1], "regions": [], "heading_path": [], "ordinal": ordinal,
            "confidence": 0.9 - 0.1 * rank}


class FakeSearch:
    """A /v1/search stand-in: records each body, answers ``hits`` (``abstain`` False)."""

    def __init__(self, hits: list[dict[str, Any]]) -> None:
        self.hits = hits
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return {"hits": self.hits, "generation": "gen_test", "mode": body["mode"], "k": body["k"],
                "reranked": False, "abstain": False, "timing_ms": {}}
