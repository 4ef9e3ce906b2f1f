"""Summaries of an :class:`EvalResult`: numbers per mode and per query kind, as a dict
(the JSON report) and as Markdown tables (``benchmarks/results/eval.md``)."""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kb_ray.eval.metrics import abstain_scores, auroc, best_threshold, distribution, mean
from kb_ray.eval.runner import SPAN_K, EvalResult, ModeResult, QueryOutcome

RANKING = ("recall@1", "recall@5", "recall@10", "recall@20", "mrr", "ndcg@10")
ALL_QUOTES = ("all@5", "all@10", "all@20")  # every gold quote of the query in the top k (metrics.all_quotes_found)
SPANS = ("span_precision", "span_recall", "span_iou")
KIND_COLUMNS = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10", "all@5", "all@10")
COMPARE = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10")
LOSS_MEASURES = ("recall@1", "mrr")  # a kb-ray mode below naive on either is flagged
EVIDENCE = ("evidence_overlap", "evidence_contains", "evidence_page", "evidence@1")
SIGNALS = ("score", "dense", "lexical")  # returned score of hit 1; best raw dense / lexical score in the hits


def summarize(result: EvalResult) -> dict[str, Any]:
    """The JSON report: dataset, labels, and per mode the averages, per-kind table and misses."""
    modes = {m.mode: summarize_mode(m) for m in result.modes}
    return {"dataset": result.dataset, "split": result.split, "k": result.k, "generation": result.generation,
            "span_k": SPAN_K, "quotes": result.quotes, "modes": modes, "vs_naive": compare_to_naive(modes)}


def compare_to_naive(modes: dict[str, Any]) -> dict[str, Any]:
    """Each kb-ray mode next to the naive reference of its base mode (``hybrid+rerank`` → naive-hybrid);
    ``loses`` names the measures of :data:`LOSS_MEASURES` where kb-ray is below naive."""
    out = {}
    for name, mode in modes.items():
        base = "hybrid" if name in ("hybrid+rerank", "contextual") else name
        naive = modes.get("naive-" + base)
        if name.startswith("naive-") or not naive or not mode["available"] or not naive["available"]:
            continue
        ours, theirs = mode["metrics"], naive["metrics"]
        out[name] = {"naive": "naive-" + base,
                     **{c: {"kb_ray": ours[c], "naive": theirs[c]} for c in COMPARE},
                     "loses": [c for c in LOSS_MEASURES if _below(ours[c], theirs[c])]}
    return out


def _below(ours: float | None, theirs: float | None) -> bool:
    return ours is not None and theirs is not None and ours < theirs


def summarize_mode(mode: ModeResult) -> dict[str, Any]:
    if not mode.available:
        return {"available": False, "note": mode.note}
    answerable = [q for q in mode.queries if q.answerable]
    return {"available": True, "queries": len(mode.queries), "answerable": len(answerable),
            "metrics": _means(answerable, RANKING + ALL_QUOTES + SPANS),
            "citations": _citations(mode.queries, answerable),
            "evidence": _evidence(answerable), "confidence": _confidence(mode.queries),
            "scores": _scores(mode.queries), "latency_ms": distribution(q.latency_ms for q in mode.queries),
            "by_kind": _by_kind(answerable), "misses": _misses(answerable)}


def _means(queries: list[QueryOutcome], names: tuple[str, ...]) -> dict[str, float | None]:
    return {name: _round(mean(q.metrics[name] for q in queries if name in q.metrics)) for name in names}


def _citations(queries: list[QueryOutcome], answerable: list[QueryOutcome]) -> dict[str, Any]:
    checked = sum(q.quotes_checked for q in queries)
    bad = sum(q.quotes_bad for q in queries)
    paged = [q for q in answerable if q.page_ok is not None]
    consistent = [q for q in paged if q.top_relevant]
    return {"hits_checked": checked, "quote_mismatches": bad,
            "quote_ok": _round(1 - bad / checked) if checked else None,
            "page@1": _round(mean(float(q.page_ok) for q in paged)), "page@1_queries": len(paged),
            "page_when_top_relevant": _round(mean(float(q.page_ok) for q in consistent))}


def _scores(queries: list[QueryOutcome]) -> dict[str, Any]:
    """Per abstain signal: top-hit score distributions of answerable vs no-answer queries."""
    out = {}
    for signal in SIGNALS:
        answerable = [q.top_scores[signal] for q in queries if q.answerable and q.top_scores.get(signal) is not None]
        unanswerable = [q.top_scores[signal] for q in queries
                        if not q.answerable and q.top_scores.get(signal) is not None]
        if answerable or unanswerable:
            out[signal] = {"answerable": _rounded(distribution(answerable)),
                           "no_answer": _rounded(distribution(unanswerable)),
                           "abstain": _rounded(best_threshold(answerable, unanswerable))}
    return out


def _evidence(answerable: list[QueryOutcome]) -> dict[str, Any]:
    """Means of the evidence metrics and how many queries each one covers."""
    return {name: {"mean": _round(mean(q.metrics[name] for q in answerable if name in q.metrics)),
                   "queries": sum(name in q.metrics for q in answerable)} for name in EVIDENCE}


def _confidence(queries: list[QueryOutcome]) -> dict[str, Any]:
    """No-answer detection by the best hit confidence: AUROC, and the abstain flag's precision/recall."""
    scored = [q for q in queries if q.confidence is not None]
    out: dict[str, Any] = {"auroc": _round(auroc([q.confidence for q in scored if q.answerable],
                                                 [q.confidence for q in scored if not q.answerable]))}
    flagged = [q for q in queries if q.abstain is not None]
    if flagged:
        out["abstain"] = _rounded(abstain_scores([q.abstain for q in flagged], [q.answerable for q in flagged]))
    return out


def _by_kind(answerable: list[QueryOutcome]) -> dict[str, dict[str, Any]]:
    kinds = sorted({q.kind for q in answerable})
    return {kind: {"queries": sum(q.kind == kind for q in answerable),
                   **_means([q for q in answerable if q.kind == kind], KIND_COLUMNS)} for kind in kinds}


def _misses(answerable: list[QueryOutcome]) -> list[dict[str, Any]]:
    """Answerable queries with no relevant chunk in the top 10."""
    return [{"id": q.id, "kind": q.kind, "recall@20": q.metrics.get("recall@20")}
            for q in answerable if not q.metrics.get("recall@10")]


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {key: _round(v) if isinstance(v, float) else v for key, v in values.items()}


# -- Markdown ------------------------------------------------------------------------------

def render_markdown(summary: dict[str, Any]) -> str:
    modes = summary["modes"]
    split = f", split `{summary['split']}`" if summary.get("split", "all") != "all" else ""
    lines = [f"Dataset `{summary['dataset']}`{split}, generation `{summary['generation']}`, k = {summary['k']}, "
             f"span metrics over the top {summary['span_k']} hits. {_quote_line(summary['quotes'])}", ""]
    lines += _retrieval_table(modes) + [""] + _naive_table(summary.get("vs_naive") or {})
    lines += _citation_table(modes) + [""] + _evidence_table(modes)
    lines += [""] + _score_table(modes) + [""] + _confidence_table(modes)
    for name, mode in modes.items():
        if mode["available"]:
            lines += ["", f"### {name}: by query kind", ""] + _kind_table(mode) + _miss_lines(mode)
    return "\n".join(lines) + "\n"


def _quote_line(quotes: dict[str, Any]) -> str:
    return (f"{quotes['resolved']} gold spans resolved ({len(quotes['whitespace_normalized'])} after whitespace "
            f"normalization, {len(quotes['ambiguous'])} ambiguous, {len(quotes['no_chunk_covers'])} queries "
            "with no covering chunk).")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [[_cell(v) for v in row] for row in rows]
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in cells]


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _retrieval_table(modes: dict[str, Any]) -> list[str]:
    header = ["mode", "queries", *RANKING, *ALL_QUOTES, *SPANS]
    rows = [[name, m["answerable"], *(m["metrics"][c] for c in RANKING + ALL_QUOTES + SPANS)] if m["available"]
            else [name, m["note"], *([None] * (len(header) - 2))] for name, m in modes.items()]
    return ["### Retrieval (answerable queries)", ""] + _table(header, rows)


def _naive_table(compared: dict[str, Any]) -> list[str]:
    if not compared:
        return []
    header = ["kb-ray mode", "naive", *(f"{c} kb-ray / naive" for c in COMPARE), "loses to naive"]
    rows = [[name, v["naive"], *(f"{_cell(v[c]['kb_ray'])} / {_cell(v[c]['naive'])}" for c in COMPARE),
             ("**LOSES: " + ", ".join(v["loses"]) + "**") if v["loses"] else "no"] for name, v in compared.items()]
    note = ("Naive reference (kb_ray/eval/naive.py): 800-character windows, 100 overlap, per page (per "
            "document without pages), bm25s default tokens + English stopwords, MiniLM exact cosine, RRF k=60; "
            "a window is relevant when it overlaps a gold span, windows covering the same gold spans count once. "
            "A kb-ray mode below naive on "
            f"{' or '.join(LOSS_MEASURES)} is marked.")
    return ["### kb-ray vs the naive reference", "", note, ""] + _table(header, rows) + [""]


def _citation_table(modes: dict[str, Any]) -> list[str]:
    header = ["mode", "hits checked", "quote mismatches", "quote ok", "page@1", "page@1 queries", "page when top relevant"]
    keys = ("hits_checked", "quote_mismatches", "quote_ok", "page@1", "page@1_queries", "page_when_top_relevant")
    rows = [[name, *(m["citations"][key] for key in keys)] for name, m in modes.items() if m["available"]]
    return ["### Citations", ""] + _table(header, rows)


def _score_table(modes: dict[str, Any]) -> list[str]:
    header = ["mode", "signal", "answerable min", "median", "max", "no-answer min", "median", "max",
              "best threshold", "accuracy"]
    rows = []
    for name, m in modes.items():
        for signal, v in (m["scores"] if m["available"] else {}).items():
            a, n, t = v["answerable"], v["no_answer"], v["abstain"]
            rows.append([name, signal, a["min"], a["median"], a["max"], n["min"], n["median"], n["max"],
                         t["threshold"], t["accuracy"]])
    note = ("`score` is the score of hit 1 as returned (RRF in every mode without rerank, so it only "
            "reflects ranks); `dense` is the best cosine and `lexical` the best BM25 score among the hits. "
            "Answer when signal >= threshold; accuracy counts answerable above and no-answer below it.")
    return ["### Top-hit score: answerable vs no-answer queries", "", note, ""] + _table(header, rows)


def _evidence_table(modes: dict[str, Any]) -> list[str]:
    header = ["mode", *(f"{name} (n)" for name in EVIDENCE)]
    rows = [[name, *(f"{_cell(m['evidence'][e]['mean'])} ({m['evidence'][e]['queries']})" for e in EVIDENCE)]
            for name, m in modes.items() if m["available"] and "evidence" in m]
    note = ("Evidence is the passage each hit quotes (kb_ray/search/evidence.py). `evidence_overlap` / "
            "`evidence_contains`: the first relevant hit's evidence span overlaps / contains a gold quote span; "
            "`evidence_page`: its evidence page is a gold page (PDF questions); `evidence@1`: hit 1's evidence "
            "overlaps a gold span (ranking misses included). (n): queries the metric covers.")
    return ["### Evidence passages (answerable queries)", "", note, ""] + _table(header, rows)


def _confidence_table(modes: dict[str, Any]) -> list[str]:
    header = ["mode", "no-answer AUROC", "abstained", "no-answer queries", "abstain precision", "abstain recall",
              "answerable abstained"]
    rows = []
    for name, m in modes.items():
        if not m["available"] or "confidence" not in m:
            continue
        a = m["confidence"].get("abstain") or {}
        rows.append([name, m["confidence"]["auroc"], a.get("abstained"), a.get("no_answer"), a.get("precision"),
                     a.get("recall"), a.get("answerable_abstained")])
    note = ("Confidence of the best hit (a logistic model over raw dense cosine, BM25, evidence cosine and "
            "coverage, retriever agreement: kb_ray/search/confidence.py). AUROC: answerable vs no-answer "
            "questions; abstain: the response flag at `search.abstain_below`.")
    return ["### Confidence and abstention", "", note, ""] + _table(header, rows)


def _kind_table(mode: dict[str, Any]) -> list[str]:
    rows = [[kind, v["queries"], *(v[c] for c in KIND_COLUMNS)] for kind, v in mode["by_kind"].items()]
    note = ("recall@k counts relevant chunks (any-hit for a one-chunk answer); all@k is 1 for a query only when "
            "every one of its gold quotes overlaps a hit in the top k (the second passage of a multi-hop question).")
    return [note, ""] + _table(["kind", "queries", *KIND_COLUMNS], rows)


def _miss_lines(mode: dict[str, Any]) -> list[str]:
    if not mode["misses"]:
        return []
    ids = ", ".join(f"`{m['id']}`" for m in mode["misses"])
    return ["", f"No relevant chunk in the top 10: {ids}."]


def write_reports(summary: dict[str, Any], markdown_path: str | Path, *, command: str = "") -> tuple[Path, Path]:
    """Write ``<path>.md`` (titled, dated, with the machine) and the JSON summary beside it."""
    markdown_path = Path(markdown_path)
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [f"# Retrieval eval ({stamp})", "",
            f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}." + (f" Command: `{command}`." if command else ""),
            ""]
    markdown_path.write_text("\n".join(head) + "\n" + render_markdown(summary), encoding="utf-8")
    json_path = markdown_path.with_suffix(".json")
    json_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return markdown_path, json_path
