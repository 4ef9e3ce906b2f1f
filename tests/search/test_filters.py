"""Filter vocabulary: parsing errors name what is allowed."""

from __future__ import annotations

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
