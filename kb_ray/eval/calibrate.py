"""Fit the hit-confidence model (kb_ray/search/confidence.py) on a dev split and store it.

    python -m kb_ray.eval.calibrate --config CONF --dataset DEV.jsonl \\
        [--out MODEL.json] [--k 10] [--recalibrate MODEL.json | --evaluate MODEL.json]

Each dev query runs in hybrid mode; every one of its top ``k`` hits is a training row
(label 1 when the chunk overlaps a gold quote, so every hit of a no-answer question is 0).
Then the query-level ``unknown_penalty`` (the logit shift per unit of the query's share of
uncommon terms the generation lacks) is the value of :data:`UNKNOWN_PENALTIES` with the best
no-answer AUROC of each dev query's best hit. The abstain threshold stored with the model
maximizes balanced accuracy (mean of the abstain rate on no-answer questions and the answer
rate on answerable ones) over the best hit's confidence of each dev query.
``--recalibrate MODEL.json`` keeps that model's hit coefficients and chooses only the penalty
and the threshold. Never fit on golden/ (the CI gate). Without ``--out`` the packaged model of
the configured ``search.evidence`` mode is rewritten
(kb_ray/search/confidence.py, ``packaged_model_path``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kb_ray.search.confidence import FEATURES, ConfidenceModel, fit_logistic, packaged_model_path

logger = logging.getLogger(__name__)
UNKNOWN_PENALTIES = (0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0)  # logit shifts tried per unit of unknown share


def collect_rows(searcher: Any, queries: list, qrels: dict[str, set[str]], *, k: int) -> list[dict[str, Any]]:
    """Per query: id, answerable, and its hits' confidence features with relevance labels."""
    out = []
    for query in queries:
        hits = searcher.search(query.query, k=k, mode="hybrid").hits
        relevant = qrels.get(query.id, set())
        out.append({"id": query.id, "answerable": query.answerable,
                    "unknown": hits[0]["confidence_features"]["unknown"] if hits else 0.0,
                    "hits": [(hit["confidence_features"], int(hit["chunk_id"] in relevant)) for hit in hits]})
    return out


def best_abstain_threshold(best: list[float], answerable: list[bool]) -> float:
    """The threshold with the best balanced accuracy (abstain when best confidence < t)."""
    positives, negatives = sum(answerable), len(answerable) - sum(answerable)
    if not positives or not negatives:
        raise ValueError("choosing an abstain threshold needs answerable and no-answer dev questions")
    candidates = sorted(set(best))
    scored = []
    for t in candidates:
        answered = sum(b >= t for b, a in zip(best, answerable) if a) / positives
        abstained = sum(b < t for b, a in zip(best, answerable) if not a) / negatives
        scored.append(((answered + abstained) / 2, t))
    score = max(scored)[0]
    ties = [t for s, t in scored if s == score]
    below = [c for c in candidates if c < min(ties)]
    return round((min(ties) + below[-1]) / 2, 4) if below else round(min(ties), 4)  # midway into the gap


def fit(rows: list[dict[str, Any]], *, info: dict[str, Any]) -> ConfidenceModel:
    """The hit model, then the query-level ``unknown_penalty``, then the abstain threshold."""
    features = [f for row in rows for f, _ in row["hits"]]
    labels = [label for row in rows for _, label in row["hits"]]
    model = replace(fit_logistic(features, labels), info={**info, "hits": len(labels), "relevant_hits": sum(labels)})
    return recalibrate(rows, model)


def recalibrate(rows: list[dict[str, Any]], model: ConfidenceModel,
                info: dict[str, Any] | None = None) -> ConfidenceModel:
    """``model``'s hit coefficients kept; ``unknown_penalty`` and the abstain threshold chosen on
    ``rows`` (``info``, when given, is recorded as the model's ``info["recalibrated"]``)."""
    model = replace(model, unknown_penalty=choose_unknown_penalty(rows, model))
    if info is not None:
        model = replace(model, info={**(model.info or {}), "recalibrated": info})
    return replace(model, abstain_below=best_abstain_threshold(best_confidences(rows, model),
                                                               [row["answerable"] for row in rows]))


def best_confidences(rows: list[dict[str, Any]], model: ConfidenceModel) -> list[float]:
    """Each query's best hit confidence (0 without hits)."""
    return [max(model.predict([f for f, _ in row["hits"]], unknown=row.get("unknown", 0.0)) or [0.0]) for row in rows]


def choose_unknown_penalty(rows: list[dict[str, Any]], model: ConfidenceModel) -> float:
    """The :data:`UNKNOWN_PENALTIES` value with the best no-answer AUROC of the best hit over
    ``rows`` (to 3 decimals; the smallest among equals); 0 without no-answer rows."""
    from kb_ray.eval.metrics import auroc

    answerable = [row["answerable"] for row in rows]
    if all(answerable) or not any(answerable):
        return 0.0
    scored = []
    for penalty in UNKNOWN_PENALTIES:
        shifted = replace(model, unknown_penalty=penalty)  # log-odds: rounded confidences would tie near 0
        best = [float(shifted.logits([f for f, _ in row["hits"]], unknown=row.get("unknown", 0.0)).max(initial=-1e9))
                for row in rows]
        value = auroc([b for b, a in zip(best, answerable) if a], [b for b, a in zip(best, answerable) if not a])
        scored.append((round(value or 0.0, 3), -penalty))
    return -max(scored)[1]


def compare_orders(rows: list[dict[str, Any]], model: ConfidenceModel) -> dict[str, dict[str, float]]:
    """MRR and hit@1 over answerable queries: hybrid order vs the hits re-sorted by confidence
    (a learned rerank of the top ``k``; stable, so ties keep the hybrid order)."""
    out: dict[str, dict[str, float]] = {}
    answerable = [row for row in rows if row["answerable"]]
    for name in ("hybrid", "confidence"):
        rr = []
        for row in answerable:
            labels = [label for _, label in row["hits"]]
            if name == "confidence":
                scores = model.predict([f for f, _ in row["hits"]])
                labels = [labels[i] for i in sorted(range(len(labels)), key=lambda i: -scores[i])]
            rr.append(next((1.0 / rank for rank, label in enumerate(labels, 1) if label), 0.0))
        out[name] = {"mrr": round(sum(rr) / len(rr), 4), "hit@1": round(sum(r == 1.0 for r in rr) / len(rr), 4),
                     "queries": len(rr)}
    return out


def no_answer_detection(rows: list[dict[str, Any]], model: ConfidenceModel) -> dict[str, Any]:
    """AUROC of the best confidence, and abstain precision/recall at the model's threshold."""
    from kb_ray.eval.metrics import abstain_scores, auroc

    best = best_confidences(rows, model)
    answerable = [row["answerable"] for row in rows]
    value = auroc([b for b, a in zip(best, answerable) if a], [b for b, a in zip(best, answerable) if not a])
    flags = [b < (model.abstain_below or 0.0) for b in best]
    return {"auroc": None if value is None else round(value, 4), "abstain_below": model.abstain_below,
            "unknown_penalty": model.unknown_penalty,
            **abstain_scores(flags, answerable)}


def _neutral_model_path(folder: Path) -> Path:
    """A zero-weight model: the searcher needs one to start; fitting ignores its output."""
    zero = dict.fromkeys(FEATURES, 0.0)
    path = folder / "neutral.json"
    path.write_text(ConfidenceModel(coef=zero, intercept=0.0, mean=zero, scale=dict.fromkeys(FEATURES, 1.0)).to_json())
    return path


def main(argv: list[str] | None = None) -> int:
    from kb_ray.config import load_config
    from kb_ray.eval import load_dataset
    from kb_ray.eval.resolve import CanonicalTexts, chunk_spans, relevant_chunks, resolve_queries
    from kb_ray.search.searcher import HybridSearcher

    args = _parser().parse_args(argv)
    if Path(args.dataset).resolve().parent.name == "golden" and not args.evaluate:
        raise SystemExit("golden/ is the CI gate: fit the confidence model on a dev split, not on it")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    queries = load_dataset(args.dataset)
    with tempfile.TemporaryDirectory() as folder:
        config = load_config(args.config, overrides=[*args.overrides,
                                                     f"search.confidence_model_path={_neutral_model_path(Path(folder))}"])
        searcher = HybridSearcher.open(config)
        resolution = resolve_queries(queries, CanonicalTexts(searcher.catalog))
        if resolution.unresolved:
            raise SystemExit("gold quotes that do not resolve:\n  " + "\n  ".join(resolution.unresolved))
        chunks = chunk_spans(searcher.catalog, [g.version_id for spans in resolution.spans.values() for g in spans])
        qrels = {qid: relevant_chunks(spans, chunks) for qid, spans in resolution.spans.items()}
        rows = collect_rows(searcher, queries, qrels, k=args.k)
    info = _info(args, list(sys.argv[1:] if argv is None else argv), queries, searcher.generation,
                 config.search.evidence)
    if args.evaluate:
        model = ConfidenceModel.load(args.evaluate)
    elif args.recalibrate:
        model = recalibrate(rows, ConfidenceModel.load(args.recalibrate), info)
    else:
        model = fit(rows, info=info)
    if not args.evaluate:
        out = Path(args.out or packaged_model_path(config.search.evidence))
        out.write_text(model.to_json(), encoding="utf-8")
        print(f"wrote {out}: abstain_below={model.abstain_below}, unknown_penalty={model.unknown_penalty}, "
              f"coef={json.dumps(model.coef)}")
    print(json.dumps({"dataset": args.dataset, "no_answer": no_answer_detection(rows, model),
                      "order": compare_orders(rows, model)}, indent=1))
    return 0


def _info(args: argparse.Namespace, argv: list[str], queries: list, generation: str,
          evidence_mode: str) -> dict[str, Any]:
    digest = hashlib.sha256(Path(args.dataset).read_bytes()).hexdigest()[:16]
    return {"fitted_on": str(args.dataset), "evidence": evidence_mode, "dataset_sha256": digest, "queries": len(queries),
            "no_answer": sum(not q.answerable for q in queries), "k": args.k, "generation": generation,
            "fitted_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python -m kb_ray.eval.calibrate " + " ".join(argv)}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kb_ray.eval.calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="YAML config of the knowledge base holding the dev corpus")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--dataset", required=True, help="dev split JSONL (never golden/queries.jsonl)")
    parser.add_argument("--out", default=None, help="artifact path (default: the packaged model of the configured "
                        "search.evidence mode, kb_ray/search/confidence_model[_lexical].json)")
    parser.add_argument("--evaluate", default=None, metavar="MODEL.json",
                        help="fit nothing: report this model's no-answer AUROC, abstain precision/recall and "
                             "hybrid vs confidence order on --dataset (e.g. the test split)")
    parser.add_argument("--recalibrate", default=None, metavar="MODEL.json",
                        help="keep this model's hit coefficients; choose only unknown_penalty and the abstain "
                             "threshold on --dataset")
    parser.add_argument("--k", type=int, default=10, help="hits per query used as training rows (default: 10)")
    return parser


if __name__ == "__main__":
    sys.exit(main())
