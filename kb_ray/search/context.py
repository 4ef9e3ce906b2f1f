"""Context around a hit for answer generation: neighbouring chunks of the same version.

Ranking never sees it. Neighbours are taken alternately after and before the hit (the
next chunk first: an answer more often continues than precedes its evidence), each whole
while it fits ``context_chars`` and the last one cut at a word boundary on its far side,
preferring chunks of the same section (the same ``heading_path``) and stopping at the
first chunk of another section on each side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Neighbour = Callable[[str, int], dict[str, Any] | None]  # (version_id, ordinal) -> chunk row or None


def hit_context(*, version_id: str, ordinal: int, heading_path: Sequence[str], context_chars: int,
                neighbour: Neighbour, max_chunks: int = 8) -> dict[str, Any]:
    """``{"before": [...], "after": [...], "chars": n}``: chunks as ``chunk_id``, ``ordinal``,
    ``text``, ``truncated``; ``chars`` (the texts' total) never exceeds ``context_chars``."""
    sides: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    budget, steps = context_chars, {"after": 1, "before": -1}
    distance = {"after": 0, "before": 0}
    open_sides = ["after", "before"]
    while budget > 0 and open_sides and sum(len(v) for v in sides.values()) < max_chunks:
        for side in list(open_sides):
            distance[side] += 1
            row = neighbour(version_id, ordinal + steps[side] * distance[side])
            if row is None or tuple(row.get("heading_path") or ()) != tuple(heading_path):
                open_sides.remove(side)
                continue
            piece = _fit(row, budget, keep_end=side == "before")
            if piece is None:
                open_sides.remove(side)
                continue
            sides[side].append(piece)
            budget -= len(piece["text"])
            if piece["truncated"]:
                open_sides.remove(side)
    sides["before"].reverse()
    return {**sides, "chars": context_chars - budget}


def _fit(row: dict[str, Any], budget: int, *, keep_end: bool) -> dict[str, Any] | None:
    text = row["text"]
    truncated = len(text) > budget
    if truncated:
        text = _cut(text, budget, keep_end=keep_end)
        if not text:
            return None
    return {"chunk_id": row["chunk_id"], "ordinal": row["ordinal"], "text": text, "truncated": truncated}


def _cut(text: str, budget: int, *, keep_end: bool) -> str:
    """At most ``budget`` characters of ``text`` at a word boundary, from its end or start."""
    if keep_end:
        piece = text[len(text) - budget:]
        space = piece.find(" ")
        return piece[space + 1:] if space >= 0 else ""
    piece = text[:budget]
    space = piece.rfind(" ")
    return piece[:space] if space >= 0 else ""
