"""The records an answer is made of, and the one interface every generator implements."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

AnswerMode = Literal["qa", "summary", "compare"]


@dataclass(frozen=True)
class Passage:
    """One numbered evidence passage given to a generator; ``quote == canonical[spans]`` of an
    active version (the hit's ``evidence``, or the chunk's quote when it has none)."""

    n: int
    chunk_id: str
    document_id: str
    version_id: str
    title: str | None
    uri: str | None
    quote: str
    spans: list[tuple[int, int]]
    pages: list[int]
    regions: list[dict[str, Any]]
    confidence: float | None = None
    heading_path: list[str] = field(default_factory=list)
    context: str | None = None  # surrounding text for the generator only; never cited
    cosine: float | None = None  # the evidence window's cosine to the query, read from stored vectors (hybrid evidence)

    def citation(self) -> dict[str, Any]:
        """The response's ``citations[]`` entry (no context, no confidence)."""
        out = asdict(self)
        for name in ("confidence", "heading_path", "context", "cosine"):
            out.pop(name)
        out["spans"] = [list(span) for span in self.spans]
        return out


@dataclass(frozen=True)
class Generation:
    """What a generator returned: text with ``[n]`` markers, and what it cost."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cost_usd: float = 0.0
    error: str | None = None  # a reason code (e.g. "timeout", "http_5xx"); text is then ""


@dataclass
class Sentence:
    text: str
    citations: list[int]
    supported: bool
    support: float
    problem: str | None = None  # "no_citation" | "unknown_citation" | "unsupported"; None when supported


class Generator(Protocol):
    """A backend that writes an answer from numbered passages.

    ``generate`` must cite with ``[n]`` markers using only the given numbers. ``repair`` gets
    the same passages plus the sentences verification flagged, and returns a whole new text.
    """

    backend: str  # "extractive" | "openai" | "vllm" | "transformers"
    model: str | None
    fingerprint: str  # sha256 of what changes the output (backend, model, prompt, sampling)

    def generate(self, *, question: str, passages: list[Passage], mode: AnswerMode) -> Generation: ...

    def repair(self, *, question: str, passages: list[Passage], mode: AnswerMode, answer: str,
               flagged: list[Sentence]) -> Generation: ...
