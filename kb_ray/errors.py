"""The small error hierarchy of kb-ray.

Exceptions are for bugs and integrity violations. Bad input (a corrupt file, an
unknown type) becomes a result with ``status="failed"`` and a reason instead.
"""

from __future__ import annotations


class KbRayError(Exception):
    """Base class of every error kb-ray raises on purpose."""


class ConfigError(KbRayError):
    """A configuration file or override is invalid."""


class SourceError(KbRayError):
    """A source could not be listed or read."""


class ParseError(KbRayError):
    """A document could not be parsed; carries a short machine-readable reason."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class SpanError(KbRayError):
    """A span does not round-trip: ``canonical[start:end] != text``. Always a bug."""


class CatalogError(KbRayError):
    """The Delta catalog is missing, incompatible or a commit failed."""


class CatalogBusyError(CatalogError):
    """Another writer holds the catalog's writer lease for longer than the wait allows."""


class FilterError(KbRayError):
    """A search filter names an unknown field or cannot be applied."""


class UploadError(KbRayError):
    """An upload the service refuses before queueing it: ``status`` is its HTTP code (400 a bad
    name or field, 413 too large, 415 a type no parser takes)."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        self.status = status
        super().__init__(message)


class RequestBodyError(KbRayError):
    """A request body the service cannot take as it is (nested too deep): HTTP 400 with the message.
    Raised from a request model's validator, so that it is not turned into a 422 field error."""
