"""LLM-written section summaries for the section tree (``index.tree_summaries: generator``, docs/tree.md).

The pattern of the contextual generation's LLM writer (kb_ray/index/contextual.py): each
section's prompt (document title, heading path and the text of the section's subtree, cut at
``index.tree_summary_input_chars``) goes to the configured answer generator with a completion
budget of ``index.tree_summary_max_tokens``; the reply is stored in ``enrichments`` (kind
``section_summary``) content-addressed by ``(enricher_fp, input_sha)``: the writer's fingerprint
(backend, model, prompts, bounds) and the sha256 of the prompt. A build asks only for the
sections with no stored summary, so a rebuild asks nothing. A failed call is stored as a
``failed`` row (asked again by the next build) and the section keeps its extractive summary.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from kb_ray import ids
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import AnswerSettings, IndexSettings
from kb_ray.index.contextual import LlmEnrichmentWriter, stored_or_written

logger = logging.getLogger(__name__)

SUMMARY_KIND = "section_summary"
SUMMARY_FORMAT = 1
MAX_SUMMARY_CHARS = 400  # a reply is cut here (whitespace folded)
SYSTEM_PROMPT = "You write short summaries of document sections for a table of contents used in search."
USER_PROMPT = """Document: {title}
Section: {path}
<section>
{text}
</section>
Summarize this section in one or two sentences: what it covers and the key facts, names and numbers \
a reader would search for. Answer only with the summary."""


@dataclass(frozen=True)
class SectionInput:
    """What the writer sees of one section: the document title, its heading path, its subtree's text."""

    title: str
    path: str
    text: str


def summary_messages(section: SectionInput, *, input_chars: int) -> list[dict[str, str]]:
    text = section.text if len(section.text) <= input_chars else section.text[:input_chars] + "\n[…]"
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_PROMPT.format(title=section.title, path=section.path or section.title,
                                                           text=text)}]


def clean_summary(text: str) -> str:
    folded = " ".join(text.split())
    return folded if len(folded) <= MAX_SUMMARY_CHARS else folded[:MAX_SUMMARY_CHARS].rsplit(" ", 1)[0] + " …"


def summary_enricher_fingerprint(answer: AnswerSettings, index: IndexSettings) -> str:
    config = {"format": SUMMARY_FORMAT, "backend": answer.generator, "model_id": answer.model_id,
              "model_path": answer.model_path, "max_tokens": index.tree_summary_max_tokens,
              "temperature": answer.temperature, "system": SYSTEM_PROMPT, "user": USER_PROMPT,
              "input_chars": index.tree_summary_input_chars, "max_summary_chars": MAX_SUMMARY_CHARS}
    return ids.fingerprint(kind="enricher", name="LlmSectionSummary", version="1", config=config)


class LlmSummaryWriter(LlmEnrichmentWriter):
    """Section summaries written by the configured answer generator."""

    kind = SUMMARY_KIND

    def __init__(self, answer: AnswerSettings, index: IndexSettings, *, generator: Any = None) -> None:
        super().__init__(answer, max_tokens=index.tree_summary_max_tokens, setting="index.tree_summaries",
                         fingerprint=summary_enricher_fingerprint(answer, index), generator=generator)
        self.input_chars = index.tree_summary_input_chars

    def messages(self, item: SectionInput) -> list[dict[str, str]]:
        return summary_messages(item, input_chars=self.input_chars)

    def clean(self, text: str) -> str:
        return clean_summary(text)


class SectionSummarizer:
    """The tree build's hook: stored summaries, the missing ones written (and stored) now."""

    def __init__(self, catalog: DeltaCatalog, writer: LlmSummaryWriter) -> None:
        self.catalog, self.writer = catalog, writer
        self.stats: dict[str, Any] = {}

    def __call__(self, sections: list[SectionInput]) -> list[str | None]:
        """Each section's summary; None where none is stored and the call failed (keep the extractive one)."""
        started = time.perf_counter()
        summaries, rows = stored_or_written(self.catalog, self.writer, sections)
        self.stats = {"writer": self.writer.name, "summaries_written": len(rows),
                      "summaries_failed": sum(row["status"] != "ok" for row in rows),
                      "seconds": round(time.perf_counter() - started, 3)}
        return summaries
