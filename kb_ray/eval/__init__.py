"""Retrieval evaluation over quote-labelled queries (promise 7, docs/architecture.md; docs/benchmarks.md).

* :mod:`~kb_ray.eval.dataset` — load and validate ``golden/queries.jsonl``-style files.
* :mod:`~kb_ray.eval.resolve` — turn each gold quote into a span of its document's active
  canonical text, and into the chunks whose spans overlap it (the qrels).
* :mod:`~kb_ray.eval.metrics` — Recall@k, MRR, nDCG@10 (via ``ir-measures``), span
  precision/recall/IoU, citation checks, score distributions.
* :mod:`~kb_ray.eval.runner` — run every query through :class:`HybridSearcher` per mode.
* :mod:`~kb_ray.eval.report` — tables per mode and per query kind (Markdown and JSON).
* :mod:`~kb_ray.eval.gate` — compare one mode with stored minimums (the CI gate).
"""

from kb_ray.eval.dataset import DatasetError, EvalQuery, RelevantQuote, load_dataset
from kb_ray.eval.gate import GateError, gate_failures, load_thresholds
from kb_ray.eval.resolve import CanonicalTexts, GoldSpan, QuoteResolutionError, find_quote, resolve_queries
from kb_ray.eval.runner import EVAL_MODES, EvalResult, run_eval

__all__ = [
    "CanonicalTexts", "DatasetError", "EVAL_MODES", "EvalQuery", "EvalResult", "GateError", "GoldSpan",
    "QuoteResolutionError", "gate_failures", "load_thresholds",
    "RelevantQuote", "find_quote", "load_dataset", "resolve_queries", "run_eval",
]
