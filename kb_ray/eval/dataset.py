"""Eval datasets: one JSON object per line, validated with pydantic (``extra="forbid"``).

A query is labelled with *quotes*, not chunk ids, so labels survive re-chunking and
re-indexing: ``{"id", "query", "relevant": [{"doc", "quote", "page"}], "kind", "answer"}``.
``relevant: []`` marks a question the corpus does not answer (used to set an abstain
threshold).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kb_ray.errors import KbRayError

# multi-part: one question asking several things of one passage or section; multi-hop: the answer
# needs two sections or two documents (comparisons, "which two settings", "where in the manual")
QueryKind = Literal["factoid", "definition", "table", "list", "identifier", "paraphrase", "multi-part", "multi-hop"]
KINDS: tuple[str, ...] = QueryKind.__args__


class DatasetError(KbRayError):
    """An eval dataset file is missing or a line does not match the schema."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RelevantQuote(_Strict):
    doc: str = Field(min_length=1, description="golden file name, matched against the end of documents.uri")
    quote: str = Field(min_length=1, description="exact text of the document's canonical text")
    page: int | None = Field(None, ge=1, description="1-based page (or slide) of the quote; null if unknown")

    @field_validator("quote")
    @classmethod
    def _not_blank(cls, quote: str) -> str:
        if not quote.strip():
            raise ValueError("quote is blank")
        return quote


class EvalQuery(_Strict):
    id: str = Field(min_length=1)
    query: str = Field(min_length=1)
    relevant: list[RelevantQuote]
    kind: QueryKind
    answer: str = Field(min_length=1)

    @property
    def answerable(self) -> bool:
        return bool(self.relevant)


def load_dataset(path: str | Path) -> list[EvalQuery]:
    """Every query of a JSONL file; a bad line raises :class:`DatasetError` naming the line."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"eval dataset {path} does not exist: pass --dataset PATH (e.g. golden/queries.jsonl)")
    queries = [_parse_line(path, number, line)
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
    _check_unique_ids(path, queries)
    if not queries:
        raise DatasetError(f"eval dataset {path} has no queries")
    return queries


def _parse_line(path: Path, number: int, line: str) -> EvalQuery:
    try:
        return EvalQuery.model_validate(json.loads(line))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<line>'}: {e['msg']}" for e in exc.errors())
        raise DatasetError(f"{path}:{number}: {problems}") from exc


def _check_unique_ids(path: Path, queries: list[EvalQuery]) -> None:
    seen: set[str] = set()
    for query in queries:
        if query.id in seen:
            raise DatasetError(f"{path}: query id {query.id!r} appears more than once; ids must be unique")
        seen.add(query.id)
