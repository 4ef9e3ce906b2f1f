"""The closed filter vocabulary, parsed from a dict and compiled to a row mask.

Allowed keys: ``collection`` (str | list), ``document_ids`` (list), ``tags_any`` (list),
``tags_all`` (list), ``mime`` (str | list), ``created_after`` / ``created_before`` (ISO
8601; naive times are UTC; both bounds are exclusive), and ``metadata`` ({field: value
or list of values}) for fields declared in ``index.filterable_metadata``, and ``acl_any``
(list of principals: keeps rows whose ``acl`` is empty or names one of them). Anything else
raises :class:`~kb_ray.errors.FilterError` naming what is allowed. The mask is applied
before top-k in every retriever (promise 6, docs/architecture.md), so a filter never silently shortens results.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.errors import FilterError

FILTER_KEYS = ("collection", "document_ids", "tags_any", "tags_all", "mime", "created_after",
               "created_before", "metadata", "acl_any")

MetadataLookup = Callable[[str], list[Any]]  # field -> one value per row (None when absent)


@dataclass(frozen=True)
class SearchFilter:
    """A validated filter; ``mask`` turns it into a boolean array over a shard's rows."""

    collection: tuple[str, ...] | None = None
    document_ids: tuple[str, ...] | None = None
    tags_any: tuple[str, ...] | None = None
    tags_all: tuple[str, ...] | None = None
    mime: tuple[str, ...] | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    metadata: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    acl_any: tuple[str, ...] | None = None

    @property
    def is_empty(self) -> bool:
        return self == SearchFilter()

    def mask(self, table: pa.Table, metadata_values: MetadataLookup) -> np.ndarray:
        mask = np.ones(table.num_rows, dtype=bool)
        for column, values in (("collection", self.collection), ("document_id", self.document_ids),
                               ("mime", self.mime)):
            if values is not None:
                mask &= _is_in(table.column(column), values)
        if self.tags_any is not None:
            mask &= _tags_match(table.column("tags"), self.tags_any, require_all=False)
        if self.tags_all is not None:
            mask &= _tags_match(table.column("tags"), self.tags_all, require_all=True)
        mask &= _date_mask(table.column("created_at"), self.created_after, self.created_before)
        if self.acl_any is not None and "acl" in table.column_names:  # an index built before acl: no acl
            acl = table.column("acl")
            mask &= _tags_match(acl, self.acl_any, require_all=False) | _empty_lists(acl)
        for name, wanted in sorted(self.metadata.items()):
            mask &= np.array([value in wanted for value in metadata_values(name)], dtype=bool)
        return mask


def parse_filters(raw: Mapping[str, Any] | None, *, filterable_metadata: Sequence[str] = ()) -> SearchFilter:
    """Validate a filter dict; unknown keys or undeclared metadata fields raise FilterError."""
    if not raw:
        return SearchFilter()
    if not isinstance(raw, Mapping):
        raise FilterError(f"filters must be a mapping of {', '.join(FILTER_KEYS)}; got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(FILTER_KEYS))
    if unknown:
        raise FilterError(f"unknown filter field(s) {unknown}; allowed fields: {', '.join(FILTER_KEYS)}")
    return SearchFilter(
        collection=_strings(raw, "collection", scalar_ok=True), document_ids=_strings(raw, "document_ids"),
        tags_any=_strings(raw, "tags_any"), tags_all=_strings(raw, "tags_all"),
        mime=_strings(raw, "mime", scalar_ok=True), created_after=_instant(raw, "created_after"),
        created_before=_instant(raw, "created_before"),
        metadata=_metadata(raw.get("metadata"), filterable_metadata), acl_any=_strings(raw, "acl_any"),
    )


def _strings(raw: Mapping[str, Any], key: str, *, scalar_ok: bool = False) -> tuple[str, ...] | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, str) and scalar_ok:
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    kind = "a string or a list of strings" if scalar_ok else "a list of strings"
    raise FilterError(f"filter {key!r} must be {kind}, got {value!r}")


def _instant(raw: Mapping[str, Any], key: str) -> datetime | None:
    value = raw.get(key)
    if value is None:
        return None
    try:
        parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise FilterError(f"filter {key!r} must be an ISO 8601 date or time, got {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _metadata(value: Any, declared: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FilterError(f"filter 'metadata' must be a mapping of field to value, got {value!r}")
    undeclared = sorted(set(value) - set(declared))
    if undeclared:
        allowed = ", ".join(declared) if declared else "none (declare them in index.filterable_metadata)"
        raise FilterError(f"metadata field(s) {undeclared} are not filterable; allowed metadata fields: {allowed}")
    return {name: tuple(v) if isinstance(v, (list, tuple)) else (v,) for name, v in value.items()}


def _is_in(column: pa.ChunkedArray, values: tuple[str, ...]) -> np.ndarray:
    result = pc.is_in(column, value_set=pa.array(values, pa.string()))
    return pc.fill_null(result, False).to_numpy(zero_copy_only=False).astype(bool)


def _tags_match(tags: pa.ChunkedArray, wanted: tuple[str, ...], *, require_all: bool) -> np.ndarray:
    tags = tags.combine_chunks() if isinstance(tags, pa.ChunkedArray) else tags
    parents = pc.list_parent_indices(tags).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(tags)
    per_tag = []
    for tag in dict.fromkeys(wanted):
        hit = pc.fill_null(pc.equal(flat, tag), False).to_numpy(zero_copy_only=False).astype(bool)
        row_has = np.zeros(len(tags), dtype=bool)
        row_has[parents[hit]] = True
        per_tag.append(row_has)
    if not per_tag:
        return np.full(len(tags), require_all, dtype=bool)
    return np.logical_and.reduce(per_tag) if require_all else np.logical_or.reduce(per_tag)


def _empty_lists(lists: pa.ChunkedArray) -> np.ndarray:
    lengths = pc.fill_null(pc.list_value_length(lists), 0)
    return (lengths.to_numpy(zero_copy_only=False) == 0).astype(bool)


def _date_mask(column: pa.ChunkedArray, after: datetime | None, before: datetime | None) -> np.ndarray:
    mask = np.ones(len(column), dtype=bool)
    for bound, compare in ((after, pc.greater), (before, pc.less)):
        if bound is not None:
            scalar = pa.scalar(bound, type=column.type)
            mask &= pc.fill_null(compare(column, scalar), False).to_numpy(zero_copy_only=False).astype(bool)
    return mask


def metadata_column(metadata_json: list[str | None], name: str) -> list[Any]:
    """One value per row for a metadata field (``None`` when missing or unparsable)."""
    values = []
    for text in metadata_json:
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        values.append(data.get(name) if isinstance(data, dict) else None)
    return values
