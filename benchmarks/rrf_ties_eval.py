"""Before/after of ``search.rrf_tie_break`` on one catalog, the naive reference in the same run.

    .venv/bin/python benchmarks/rrf_ties_eval.py --kb KB [--dataset Q.jsonl --split dev|test]
        [--naive-cache DIR] [--json out.json]

Runs the eval harness (kb_ray.eval.run_eval, k = 20) once with the default settings in
dense, lexical and hybrid mode plus the naive reference, then hybrid again with each other
tie-break (``content``: the content-hash tie key alone, the default; ``lexical``; ``dense``); dense and
lexical mode do not fuse, so they are the same in every row. Prints R@1 / R@5 / MRR per row.
``--split`` keeps the ids that ``benchmarks/realdocs/queries.split.json`` lists under it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kb_ray.config import load_config  # noqa: E402

SPLIT_FILE = REPO / "benchmarks" / "realdocs" / "queries.split.json"
MEASURES = ("recall@1", "recall@5", "mrr")


def measure(config, queries, modes, *, embedder, naive: bool, naive_cache: str | None) -> dict:
    from kb_ray.eval import run_eval
    from kb_ray.eval.report import summarize
    from kb_ray.search import HybridSearcher

    searcher = HybridSearcher.open(config, embedder=embedder)
    result = run_eval(config, queries, modes=modes, k=20, searcher=searcher, naive=naive, naive_cache=naive_cache)
    summary = summarize(result)["modes"]
    return {mode: {m: summary[mode]["metrics"][m] for m in MEASURES} for mode in summary}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", required=True)
    parser.add_argument("--dataset", type=Path, default=REPO / "golden" / "queries.jsonl")
    parser.add_argument("--split", default=None)
    parser.add_argument("--naive-cache", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from kb_ray.embedding.text import TextEmbedder
    from kb_ray.eval import load_dataset

    queries = load_dataset(args.dataset)
    if args.split:
        ids = set(json.loads(SPLIT_FILE.read_text(encoding="utf-8"))[args.split])
        queries = [q for q in queries if q.id in ids]
    embedder, rows = TextEmbedder(), {}
    base = [f"kb_root={args.kb}"]
    default = load_config(REPO / "conf" / "local.yaml", overrides=base)
    rows[f"default (rrf_tie_break={default.search.rrf_tie_break})"] = measure(
        default, queries, ("dense", "lexical", "hybrid"), embedder=embedder, naive=True, naive_cache=args.naive_cache)
    for tie_break in ("content", "dense", "lexical"):
        if tie_break != default.search.rrf_tie_break:
            config = load_config(REPO / "conf" / "local.yaml", overrides=[*base, f"search.rrf_tie_break={tie_break}"])
            rows[f"rrf_tie_break={tie_break}"] = measure(config, queries, ("hybrid",), embedder=embedder,
                                                         naive=False, naive_cache=None)
    print(f"{len(queries)} queries ({args.split or 'all'}) from {args.dataset}")
    for name, modes in rows.items():
        for mode, m in modes.items():
            print(f"{name:40s} {mode:14s} R@1 {m['recall@1']:.3f}  R@5 {m['recall@5']:.3f}  MRR {m['mrr']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
