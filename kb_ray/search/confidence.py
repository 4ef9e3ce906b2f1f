"""Confidence of a hit in [0, 1] from the retrievers' raw signals, and the abstain decision.

RRF scores only reflect ranks, so they cannot tell a no-answer question from an answerable
one. Confidence is a small logistic model over raw, per-hit signals that exist whatever the
fusion (:data:`FEATURES`):

* ``dense`` — the hit's cosine to the query (when dense did not retrieve it: the lowest
  cosine dense retrieved, an upper bound);
* ``lexical`` — ``log1p`` of the hit's raw BM25 score divided by the query's content-word
  count (0 when lexical did not retrieve it), so long queries do not look surer;
* ``evidence_cosine`` / ``evidence_coverage`` — the evidence passage's cosine to the query
  and the share of the query's content words it contains (kb_ray/search/evidence.py); a hit
  whose passage was chosen by coverage alone (past ``search.evidence_dense_hits``) counts
  its chunk's ``dense`` value instead (so with ``search.evidence: lexical`` it equals ``dense``);
* ``agree`` — 1 when both dense and lexical retrieved the hit.

One signal belongs to the query, not to a hit: ``unknown``, the IDF-weighted share of the
query's analyzed terms that no chunk of the generation holds in its BM25 body and that are
not common English words (:func:`unknown_share`, :func:`common_words`; "DKMS" or "xdist"
asked of a knowledge base that never mentions them). It lowers every hit's confidence
alike, ``z - unknown_penalty * unknown`` in logit space, so it changes no order and only
moves abstention. Fitted per hit, a query-level
signal learns nothing about which hit is relevant, so ``unknown_penalty`` is chosen
separately on the dev split, by the no-answer AUROC of the best hit (kb_ray/eval/calibrate.py);
a model without it (older artifacts) has penalty 0.

Coefficients live in versioned JSON artifacts beside this file, one per ``search.evidence``
mode they were fitted with (:func:`packaged_model_path`: ``confidence_model.json`` for
``hybrid``, ``confidence_model_lexical.json`` for ``lexical``), fitted on a dev split by
``python -m kb_ray.eval.calibrate`` (see docs/search.md).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Container
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from kb_ray.index.bm25 import CorpusStatistics
from kb_ray.search.evidence import query_terms

logger = logging.getLogger(__name__)

FEATURES = ("dense", "lexical", "evidence_cosine", "evidence_coverage", "agree")
DEFAULT_MODEL_PATH = Path(__file__).with_name("confidence_model.json")  # fitted with search.evidence: hybrid
LEXICAL_MODEL_PATH = Path(__file__).with_name("confidence_model_lexical.json")
MODEL_FORMAT = "kb-ray-confidence/1"


def packaged_model_path(evidence: str) -> Path:
    """The packaged model fitted with this ``search.evidence`` mode: with lexical evidence the
    ``evidence_cosine`` feature is the chunk's dense cosine, so a hybrid-fitted model misreads it.
    ``none`` (no evidence signals at all) has no fitted model and gets the hybrid one."""
    return LEXICAL_MODEL_PATH if evidence == "lexical" else DEFAULT_MODEL_PATH


class ConfidenceModelError(ValueError):
    """The confidence artifact is missing, malformed or names other features."""


def hit_features(hit: dict[str, Any], *, query: str, dense_floor: float | None) -> dict[str, float]:
    """The raw signals of one hit (see the module docstring); missing signals count as 0."""
    scores = hit.get("scores") or {}
    dense, lexical = scores.get("dense"), scores.get("lexical")
    signals = (hit.get("evidence") or {}).get("signals") or {}
    terms = max(1, len(query_terms(query)))
    dense_value = float(dense if dense is not None else (dense_floor if dense_floor is not None else 0.0))
    return {
        "dense": dense_value,
        "lexical": math.log1p(max(0.0, float(lexical))) / terms if lexical is not None else 0.0,
        "evidence_cosine": float(signals.get("cosine", dense_value if signals else 0.0)),
        "evidence_coverage": float(signals.get("coverage", 0.0)),
        "agree": float(dense is not None and lexical is not None),
    }


@dataclass(frozen=True)
class ConfidenceModel:
    """``confidence = sigmoid(intercept + sum(coef[f] * (x[f] - mean[f]) / scale[f]))``."""

    coef: dict[str, float]
    intercept: float
    mean: dict[str, float]
    scale: dict[str, float]
    abstain_below: float | None = None
    info: dict[str, Any] | None = None
    unknown_penalty: float = 0.0  # logit shift per unit of the query's ``unknown`` share

    @classmethod
    def load(cls, path: str | Path = DEFAULT_MODEL_PATH) -> ConfidenceModel:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfidenceModelError(f"cannot read the confidence model {path}: {exc}") from exc
        if data.get("format") != MODEL_FORMAT or set(data.get("features", [])) != set(FEATURES):
            raise ConfidenceModelError(f"{path} is not a {MODEL_FORMAT} model over {FEATURES}: refit it with "
                                       "python -m kb_ray.eval.calibrate")
        return cls(coef=data["coef"], intercept=float(data["intercept"]), mean=data["mean"], scale=data["scale"],
                   abstain_below=data.get("abstain_below"), info=data.get("info"),
                   unknown_penalty=float(data.get("unknown_penalty", 0.0)))

    def predict(self, features: list[dict[str, float]], *, unknown: float = 0.0) -> list[float]:
        """Confidence of each hit, to 4 decimals; ``unknown``: the query's :func:`unknown_share`."""
        return [round(float(v), 4) for v in 1.0 / (1.0 + np.exp(-self.logits(features, unknown=unknown)))]

    def logits(self, features: list[dict[str, float]], *, unknown: float = 0.0) -> np.ndarray:
        """The unrounded log-odds behind :meth:`predict` (what calibration compares)."""
        z = np.full(len(features), self.intercept - self.unknown_penalty * unknown)
        for name in FEATURES:
            x = np.array([f[name] for f in features], dtype=np.float64)
            z += self.coef[name] * (x - self.mean[name]) / self.scale[name]
        return z

    def to_json(self) -> str:
        return json.dumps({"format": MODEL_FORMAT, "features": list(FEATURES), "coef": self.coef,
                           "intercept": self.intercept, "mean": self.mean, "scale": self.scale,
                           "abstain_below": self.abstain_below, "unknown_penalty": self.unknown_penalty,
                           "info": self.info or {}}, indent=2) + "\n"


def unknown_share(terms: list[str], statistics: CorpusStatistics, *, common: Container[str] = frozenset()) -> float:
    """The IDF-weighted share of the distinct ``terms`` that no document of ``statistics`` holds
    and that are not ``common`` words (BM25's IDF, kb_ray/index/bm25.py); 0 for a query without
    terms."""
    distinct = list(dict.fromkeys(terms))
    if not distinct or statistics.documents <= 0:
        return 0.0
    idf = {t: statistics.idf(t) for t in distinct}
    missing = sum(idf[t] for t in distinct if not statistics.document_frequency.get(t, 0) and t not in common)
    return round(missing / sum(idf.values()), 6)


@lru_cache(maxsize=1)
def common_words() -> frozenset[str] | None:
    """Whole words of the packaged MiniLM's WordPiece vocabulary (``tokenizer.json``): the
    ~22k most frequent words of its English training text. A knowledge base that lacks one
    of them ("phone", "money") says little about the question, for a small one lacks most;
    a query word outside it and outside the knowledge base ("dkms", "xdist") says more.
    ``None`` where the packaged model is not installed (a serve-only install without the
    ``embed`` extra): the ``unknown`` signal is then off."""
    from kb_ray.embedding.model_files import default_model_path
    from kb_ray.errors import KbRayError

    try:
        path = default_model_path() / "tokenizer.json"
        vocabulary = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
    except (KbRayError, OSError, KeyError, json.JSONDecodeError) as exc:
        logger.warning("no common-word list (%s): confidence ignores query terms the knowledge base lacks", exc)
        return None
    return frozenset(word for word in vocabulary if word.isalpha() and not word.startswith("##"))


def fit_logistic(rows: list[dict[str, float]], labels: list[int], *, l2: float = 1.0,
                 iterations: int = 50) -> ConfidenceModel:
    """L2-regularized logistic regression by Newton's method on standardized features."""
    if len(set(labels)) < 2:
        raise ConfidenceModelError("fitting needs both relevant and non-relevant hits")
    raw = np.array([[r[name] for name in FEATURES] for r in rows], dtype=np.float64)
    mean, scale = raw.mean(axis=0), raw.std(axis=0)
    scale[scale < 1e-9] = 1.0
    x = np.hstack([np.ones((len(rows), 1)), (raw - mean) / scale])
    y = np.asarray(labels, dtype=np.float64)
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0  # the intercept is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + penalty * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return ConfidenceModel(coef={n: float(c) for n, c in zip(FEATURES, w[1:])}, intercept=float(w[0]),
                           mean={n: float(m) for n, m in zip(FEATURES, mean)},
                           scale={n: float(s) for n, s in zip(FEATURES, scale)})


def abstains(confidences: list[float], *, below: float) -> bool:
    """Abstain when no hit reaches ``below`` (an empty result always abstains)."""
    return not confidences or max(confidences) < below
