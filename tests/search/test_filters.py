"""Filter vocabulary: parsing errors name what is allowed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kb_ray.errors import FilterError
from kb_ray.search.filters import FILTER_KEYS, parse_filters


def test_unknown_filter_field_lists_allowed_fields():
    with pytest.raises(FilterError) as error:
        parse_filters({"colection": "x"})
    assert all(key in str(error.value) for key in FILTER_KEYS)


def test_undeclared_metadata_field_is_an_error():
    with pytest.raises(FilterError, match="allowed metadata fields: team"):
        parse_filters({"metadata": {"owner": "x"}}, filterable_metadata=["team"])
    assert parse_filters({"metadata": {"team": "x"}}, filterable_metadata=["team"]).metadata == {"team": ("x",)}


@pytest.mark.parametrize("raw", [
    {"collection": 3}, {"document_ids": "doc_1"}, {"tags_any": [1]}, {"created_after": "yesterday"},
    {"metadata": ["team"]},
])
def test_badly_typed_filters_raise(raw):
    with pytest.raises(FilterError):
        parse_filters(raw, filterable_metadata=["team"])


def test_empty_filters_are_empty():
    assert parse_filters(None).is_empty and parse_filters({}).is_empty
    assert parse_filters({"created_before": "2025-01-01"}).created_before.tzinfo is not None


def test_acl_any_keeps_rows_with_no_acl_or_a_shared_principal():
    table = pa.table({name: pa.array([None] * 4, pa.string()) for name in ("collection", "document_id", "mime")})
    table = table.append_column("tags", pa.array([[]] * 4, pa.list_(pa.string())))
    table = table.append_column("created_at", pa.array([None] * 4, pa.timestamp("us", tz="UTC")))
    table = table.append_column("acl", pa.array([[], ["alice"], ["bob", "eng"], None], pa.list_(pa.string())))
    mask = parse_filters({"acl_any": ["eng", "carol"]}).mask(table, lambda name: [])
    assert mask.tolist() == [True, False, True, True]
    with pytest.raises(FilterError):
        parse_filters({"acl_any": "eng"})
