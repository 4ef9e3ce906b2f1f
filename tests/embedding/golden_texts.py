"""Real texts the embedding-runtime tests compare vectors on: golden paragraphs and queries."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def golden_texts(*, with_long: bool = False) -> list[str]:
    """Paragraphs of three golden sources (prose, lists, Vietnamese), 40 golden queries and,
    with ``with_long``, all paragraphs joined (past max_seq_length: truncation must agree too)."""
    paragraphs = []
    for name in ("guide.md", "notes.txt", "vietnamese.txt"):
        text = (REPO / "golden" / "sources" / name).read_text(encoding="utf-8")
        paragraphs += [p.strip() for p in text.split("\n\n") if p.strip()]
    queries = [json.loads(line)["query"] for line in (REPO / "golden" / "queries.jsonl").read_text().splitlines()
               if line.strip()]
    return paragraphs + queries[:40] + ([" ".join(paragraphs)] if with_long else [])
