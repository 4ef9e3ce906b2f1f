"""Errors of the search core."""

from __future__ import annotations

from kb_ray.errors import KbRayError


class SearchRequestError(KbRayError):
    """A search request is invalid (empty query, k out of range, unknown mode, bad vector)."""
