"""Errors of the search core."""

from __future__ import annotations

from kb_ray.errors import KbRayError


class SearchRequestError(KbRayError):
    """A search request is invalid (empty query, k out of range, unknown mode, bad vector)."""


def query_too_long(length: int, limit: int) -> str:
    return f"the query has {length} characters, over search.max_query_chars ({limit}): shorten it"
