"""Answer eval (``kb-ray eval --answers``): each question of a quote-labelled set answered by
:func:`kb_ray.answer.local.local_answerer`, per generator, and scored against its gold quotes.

Per question (docs/answers.md, "Log, feedback and eval"):

* **gold span in pack** — the retrieval's share (the ceiling of citation recall): an
  answerable question counts 1 when a passage of the evidence pack given to the generator
  overlaps a gold span (same rule as below). **gold chunk in pack** / **cites gold chunk**:
  the same at chunk level (the passage's chunk overlaps a gold span, as the retrieval eval's
  qrels), so a passage cut from the right chunk but beside the quote shows as the gap.
* **citation recall** — an answerable question counts 1 when a citation of the answer
  overlaps a gold span: same version of the gold document, a cited span intersecting the
  gold quote's span (an abstained answer cites nothing: 0). ``cites_gold_document`` is the
  same at document level, ``contains_gold`` says the answer text holds the gold quote
  (case and whitespace folded).
* **citation precision** — of every ``[n]`` a sentence carries, the share that is
  *supported*: ``n`` is a citation of the response, its quote is verbatim the canonical text
  at its spans, and verification found the sentence supported.
* **abstention** — on no-answer questions (``relevant: []``) the share that abstained; on
  answerable ones the share wrongly refused (false refusals).
* **unsupported-sentence rate** — flagged sentences / all sentences; latency p50 / p95 of the
  answerer's ``timings_ms.total``.
"""

from __future__ import annotations

import logging
import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from kb_ray.answer.pack import evidence_pack
from kb_ray.eval.dataset import EvalQuery
from kb_ray.eval.metrics import mean, quote_matches
from kb_ray.eval.resolve import (
    GoldSpan,
    QuoteResolutionError,
    chunk_spans,
    overlaps,
    relevant_chunks,
    resolve_queries,
)

logger = logging.getLogger(__name__)
_SPACE = re.compile(r"\s+")


@dataclass
class AnswerOutcome:
    id: str
    kind: str
    answerable: bool
    abstained: bool
    verification: str
    latency_ms: float
    search_ms: float = 0.0  # of latency_ms: the hybrid search (the retrieval alone, same run)
    cites_gold: bool | None = None  # answerable only: a cited span overlaps a gold span
    gold_in_pack: bool | None = None  # answerable only: a passage GIVEN to the generator overlaps a gold span
    gold_chunk_in_pack: bool | None = None  # ... a given passage comes from a chunk that overlaps a gold span
    cites_gold_chunk: bool | None = None  # ... a cited passage comes from such a chunk
    cites_gold_document: bool | None = None
    contains_gold: bool | None = None
    citations: int = 0  # [n] markers over all sentences
    supported_citations: int = 0
    verbatim_citations: int = 0  # response citations whose quote is canonical[spans]
    response_citations: int = 0
    sentences: int = 0
    unsupported: int = 0


@dataclass
class GeneratorResult:
    generator: dict[str, Any]
    queries: list[AnswerOutcome] = field(default_factory=list)


@dataclass
class AnswerEvalResult:
    dataset: str
    split: str
    generation: str | None
    generators: list[GeneratorResult]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_answer(query: EvalQuery, response: dict[str, Any], gold: list[GoldSpan], texts: Any) -> AnswerOutcome:
    """One answer against its gold spans; ``texts.text(version_id)`` gives canonical texts."""
    sentences = response.get("sentences") or []
    citations = {c["n"]: c for c in response.get("citations") or []}
    verbatim = {n for n, c in citations.items() if quote_matches(c, texts.text(c["version_id"]))}
    markers = [(s, n) for s in sentences for n in s.get("citations") or []]
    outcome = AnswerOutcome(
        id=query.id, kind=query.kind, answerable=query.answerable, abstained=bool(response.get("abstained")),
        verification=response.get("verification") or "", latency_ms=float(response["timings_ms"].get("total", 0.0)),
        search_ms=float(response["timings_ms"].get("search", 0.0)),
        citations=len(markers), supported_citations=sum(bool(s.get("supported")) and n in verbatim for s, n in markers),
        verbatim_citations=len(verbatim), response_citations=len(citations), sentences=len(sentences),
        unsupported=sum(not s.get("supported") for s in sentences))
    if query.answerable:
        cited = list(citations.values())
        outcome.cites_gold = any(c["version_id"] == g.version_id and overlaps([tuple(s) for s in c["spans"]],
                                                                               g.start, g.end)
                                 for c in cited for g in gold)
        outcome.cites_gold_document = any(c["version_id"] == g.version_id for c in cited for g in gold)
        answer = _fold(response.get("answer") or "") if not outcome.abstained else ""
        outcome.contains_gold = any(_fold(r.quote) in answer for r in query.relevant)
    return outcome


def run_answer_eval(answerers: dict[str, Any], queries: list[EvalQuery], *, texts: Any, dataset: str = "",
                    split: str = "all", generation: str | None = None, k: int | None = None) -> AnswerEvalResult:
    """Answer every query with each answerer (name → :class:`Answerer`); gold quotes that do not
    resolve raise before any answer."""
    resolution = resolve_queries(queries, texts)
    if resolution.unresolved:
        raise QuoteResolutionError("gold quotes that do not resolve:\n  " + "\n  ".join(resolution.unresolved))
    chunks = chunk_spans(texts.catalog, [g.version_id for spans in resolution.spans.values() for g in spans])
    qrels = {qid: relevant_chunks(spans, chunks) for qid, spans in resolution.spans.items()}
    results = []
    for name, answerer in answerers.items():
        result = GeneratorResult(generator={"name": name, **answerer.generator_info()})
        searched: list[dict[str, Any]] = []
        answerer.search = _recording(answerer.search, searched)
        for n, query in enumerate(queries, 1):
            searched.clear()
            response = answerer.answer({"query": query.query, "mode": "qa", "k": k})
            gold = resolution.spans.get(query.id, [])
            result.queries.append(score_answer(query, response, gold, texts))
            if query.answerable:
                _add_pack_scores(result.queries[-1], searched, gold, qrels.get(query.id, set()), answerer.settings,
                                 response)
            if n % 25 == 0:
                logger.info("answer eval %s: %d/%d questions", name, n, len(queries))
        results.append(result)
    return AnswerEvalResult(dataset=dataset, split=split, generation=generation, generators=results)


def _recording(search: Any, into: list[dict[str, Any]]) -> Any:
    """The answerer's search, keeping each result (to see which passages the generator got)."""
    def record(body: dict[str, Any]) -> dict[str, Any]:
        into.append(search(body))
        return into[-1]
    return record


def _add_pack_scores(outcome: AnswerOutcome, searched: list[dict[str, Any]], gold: list[GoldSpan],
                     gold_chunks: set[str], settings: Any, response: dict[str, Any]) -> None:
    """Whether the evidence pack held the gold span / a gold chunk, and whether a cited passage is of a gold chunk."""
    passages = [p for result in searched for p in evidence_pack(hits=result.get("hits") or [], settings=settings)]
    outcome.gold_in_pack = any(p.version_id == g.version_id and overlaps(p.spans, g.start, g.end)
                               for p in passages for g in gold)
    outcome.gold_chunk_in_pack = any(p.chunk_id in gold_chunks for p in passages)
    outcome.cites_gold_chunk = any(c["chunk_id"] in gold_chunks for c in response.get("citations") or [])


def summarize_generator(result: GeneratorResult) -> dict[str, Any]:
    """The per-generator row: rates over the questions (None where no question qualifies)."""
    q = result.queries
    answerable = [o for o in q if o.answerable]
    unanswerable = [o for o in q if not o.answerable]
    citations = sum(o.citations for o in q)
    sentences = sum(o.sentences for o in q)
    latencies, searches = sorted(o.latency_ms for o in q), sorted(o.search_ms for o in q)
    return {
        "generator": result.generator, "questions": len(q), "answerable": len(answerable),
        "no_answer": len(unanswerable),
        "citation_recall": mean(float(o.cites_gold) for o in answerable),
        "gold_in_pack": mean(float(o.gold_in_pack) for o in answerable if o.gold_in_pack is not None),
        "gold_chunk_in_pack": mean(float(o.gold_chunk_in_pack) for o in answerable if o.gold_chunk_in_pack is not None),
        "cites_gold_chunk": mean(float(o.cites_gold_chunk) for o in answerable if o.cites_gold_chunk is not None),
        "cites_gold_document": mean(float(o.cites_gold_document) for o in answerable),
        "contains_gold": mean(float(o.contains_gold) for o in answerable),
        "citation_precision": sum(o.supported_citations for o in q) / citations if citations else None,
        "verbatim_citations": (sum(o.verbatim_citations for o in q) / sum(o.response_citations for o in q)
                               if any(o.response_citations for o in q) else None),
        "abstention_no_answer": mean(float(o.abstained) for o in unanswerable),
        "false_refusal": mean(float(o.abstained) for o in answerable),
        "unsupported_sentence_rate": sum(o.unsupported for o in q) / sentences if sentences else None,
        "sentences": sentences, "citations": citations,
        "latency_ms": {"p50": _quantile(latencies, 0.5), "p95": _quantile(latencies, 0.95)},
        "search_ms": {"p50": _quantile(searches, 0.5), "p95": _quantile(searches, 0.95)},
        "misses": [o.id for o in answerable if not o.cites_gold],
        "refused_no_answer_missed": [o.id for o in unanswerable if not o.abstained],
    }


def summarize_answers(result: AnswerEvalResult) -> dict[str, Any]:
    return {"dataset": result.dataset, "split": result.split, "generation": result.generation,
            "generators": [summarize_generator(g) for g in result.generators]}


COLUMNS = (("gold chunk in pack", "gold_chunk_in_pack"), ("gold span in pack", "gold_in_pack"),
           ("cites gold chunk", "cites_gold_chunk"), ("citation recall", "citation_recall"), ("cites gold doc", "cites_gold_document"),
           ("contains gold", "contains_gold"), ("citation precision", "citation_precision"),
           ("verbatim", "verbatim_citations"), ("abstain (no-answer)", "abstention_no_answer"),
           ("false refusal", "false_refusal"), ("unsupported sent.", "unsupported_sentence_rate"))


def render_answers_markdown(summary: dict[str, Any]) -> str:
    """The per-generator table and the misses, as Markdown."""
    header = ["generator", "questions", *(title for title, _ in COLUMNS), "p50 ms", "p95 ms", "search p50 ms"]
    lines = [f"dataset `{summary['dataset']}` (split {summary['split']}), index generation "
             f"`{summary['generation']}`", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    for row in summary["generators"]:
        cells = [row["generator"]["name"], f"{row['questions']} ({row['answerable']} answerable)",
                 *(_fmt(row[key]) for _, key in COLUMNS),
                 _fmt(row["latency_ms"]["p50"], 1), _fmt(row["latency_ms"]["p95"], 1),
                 _fmt(row["search_ms"]["p50"], 1)]
        lines.append("| " + " | ".join(cells) + " |")
    for row in summary["generators"]:
        lines += ["", f"{row['generator']['name']} (fingerprint `{row['generator']['fingerprint'][:12]}`): "
                  f"{row['sentences']} sentences, {row['citations']} citations; answerable questions whose "
                  f"answer cites no gold passage: {', '.join(row['misses']) or 'none'}; no-answer questions "
                  f"answered anyway: {', '.join(row['refused_no_answer_missed']) or 'none'}"]
    return "\n".join(lines)


def _fold(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"
