"""Lexical and fusion variants side by side on one ingested catalog, through the eval harness.

    .venv/bin/python benchmarks/lexical_eval.py --kb /path/to/kb --dataset queries.jsonl \\
        [--split dev] [--variants NAME ...] [--modes lexical,hybrid] [--json out.json]

Every variant is a list of ``--set`` overrides (``VARIANTS`` below): index settings give
it its own generation (built once, then reused: same spec = same generation id), search
settings only change the searcher. Each runs the golden-style eval
(kb_ray.eval.run_eval, k=20) in the named modes and prints recall@1/@5, MRR and nDCG@10.
``--split dev --split-file queries.split.json`` keeps the queries whose ids the split
file lists under ``dev`` (a JSON object: split name → ids). Nothing is tuned here: it
measures; choose on the dev split, report the test split.
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
from kb_ray.eval.dataset import EvalQuery  # noqa: E402

OLD = ["index.lexical=bm25s", "search.fusion=rrf"]
NEW = ["index.lexical=bm25"]
BODY_ONLY = ['search.lexical_channels={"body": 1.0, "heading": 0.0, "path": 0.0, "exact": 0.0}']
PLAIN = ["index.lexical_stem=false", "index.lexical_identifiers=false", "index.lexical_heading_in_body=false"]


def channels(body=1.0, heading=0.0, path=0.0, exact=0.0) -> list[str]:
    return [f"search.lexical_channels={json.dumps({'body': body, 'heading': heading, 'path': path, 'exact': exact})}"]


def fusion(method: str, dense: float = 1.0, lexical: float = 1.0, channel_weights: list[str] | None = None,
           rrf_k: int = 60) -> list[str]:
    return NEW + (channel_weights or []) + [f"search.fusion={method}", f"search.rrf_k={rrf_k}",
                                            f"search.weights={json.dumps({'dense': dense, 'lexical': lexical})}"]


GROUPS: dict[str, dict[str, list[str]]] = {
    "analyzer": {  # lexical mode; the heading path pasted into the body as before, to isolate the analyzer
        "bm25s per shard (before)": OLD,
        "tantivy en_stem per shard": ["index.lexical=tantivy"],
        "bm25 global stats, plain tokens": NEW + BODY_ONLY + [
            "index.lexical_stem=false", "index.lexical_identifiers=false", "index.lexical_heading_in_body=true"],
        "bm25 global + stem": NEW + BODY_ONLY + [
            "index.lexical_stem=true", "index.lexical_identifiers=false", "index.lexical_heading_in_body=true"],
        "bm25 global + identifiers": NEW + BODY_ONLY + [
            "index.lexical_stem=false", "index.lexical_identifiers=true", "index.lexical_heading_in_body=true"],
        "bm25 global + stem + identifiers": NEW + BODY_ONLY + [
            "index.lexical_stem=true", "index.lexical_identifiers=true", "index.lexical_heading_in_body=true"],
    },
    "channels": {  # the analyzer chosen on dev (plain tokens); body is the chunk text alone unless said
        "plain, heading in body": NEW + PLAIN + ["index.lexical_heading_in_body=true"] + channels(),
        "plain, body only": NEW + PLAIN + channels(),
        **{f"plain, body + heading {h}": NEW + PLAIN + channels(heading=h) for h in (0.1, 0.25, 0.5, 1.0)},
        **{f"plain, body + path {p}": NEW + PLAIN + channels(path=p) for p in (0.1, 0.25, 0.5)},
        **{f"plain, body + exact {e}": NEW + PLAIN + channels(exact=e) for e in (0.25, 0.5, 1.0)},
        "plain, heading in body + exact 0.5": NEW + PLAIN + ["index.lexical_heading_in_body=true"] + channels(exact=0.5),
        "plain, heading in body + path 0.5": NEW + PLAIN + ["index.lexical_heading_in_body=true"] + channels(path=0.5),
        "plain, heading in body + path 0.5 + exact 0.5": NEW + PLAIN + ["index.lexical_heading_in_body=true"]
        + channels(path=0.5, exact=0.5),
        "plain, heading in body + path 1.0": NEW + PLAIN + ["index.lexical_heading_in_body=true"] + channels(path=1.0),
        "stem+identifiers, body + heading 0.25 + exact 0.5": NEW + [
            "index.lexical_stem=true", "index.lexical_identifiers=true", "index.lexical_heading_in_body=false"]
        + channels(heading=0.25, exact=0.5),
    },
}
CHOSEN = channels(path=0.5)  # the defaults picked on the dev split, spelled out
GROUPS["channels"]["stem+identifiers, heading in body + path 0.5"] = NEW + [
    "index.lexical_stem=true", "index.lexical_identifiers=true", "index.lexical_heading_in_body=true"] + CHOSEN
GROUPS["fusion"] = {  # hybrid mode on the chosen lexical index
    "rrf k=60 (before)": fusion("rrf") + CHOSEN,
    "rrf k=20": fusion("rrf", rrf_k=20) + CHOSEN,
    "rrf k=60, dense 0.5 / lexical 1": fusion("rrf", 0.5, 1.0) + CHOSEN,
    "rrf k=60, dense 0.75 / lexical 1": fusion("rrf", 0.75, 1.0) + CHOSEN,
    **{f"minmax dense {d} / lexical {round(1 - d, 2)}": fusion("minmax", d, round(1 - d, 2)) + CHOSEN
       for d in (0.3, 0.5, 0.7)},
    **{f"zscore dense {d} / lexical {round(1 - d, 2)}": fusion("zscore", d, round(1 - d, 2)) + CHOSEN
       for d in (0.3, 0.5, 0.7)},
}
VARIANTS: dict[str, list[str]] = {name: o for group in GROUPS.values() for name, o in group.items()}


def load_queries(path: Path, split: str | None, split_file: Path | None) -> list[EvalQuery]:
    from kb_ray.eval import load_dataset

    queries = load_dataset(path)
    if split is None:
        return queries
    if split_file is None:
        raise SystemExit("--split needs --split-file")
    ids = set(json.loads(split_file.read_text(encoding="utf-8"))[split])
    return [q for q in queries if q.id in ids]


def measure(kb: str, overrides: list[str], queries: list[EvalQuery], modes: tuple[str, ...], embedder) -> dict:
    from kb_ray.eval import run_eval
    from kb_ray.eval.report import summarize
    from kb_ray.index import build_index
    from kb_ray.search import HybridSearcher

    config = load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={kb}", "index.switch_after_build=false",
                                                                  *overrides])
    manifest = build_index(config)
    searcher = HybridSearcher.open(config, generation_id=manifest.generation_id, embedder=embedder)
    summary = summarize(run_eval(config, queries, modes=modes, k=20, searcher=searcher))
    return {mode: {m: summary["modes"][mode]["metrics"][m] for m in ("recall@1", "recall@5", "mrr", "ndcg@10")}
            for mode in modes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", required=True)
    parser.add_argument("--dataset", type=Path, default=REPO / "golden" / "queries.jsonl")
    parser.add_argument("--split", default=None)
    parser.add_argument("--split-file", type=Path, default=None)
    parser.add_argument("--group", choices=sorted(GROUPS), default=None, help="one group of VARIANTS")
    parser.add_argument("--variants", nargs="*", default=None, help="names from VARIANTS (default: all)")
    parser.add_argument("--set", action="append", default=[], help="an extra variant: NAME=override;override")
    parser.add_argument("--modes", default="lexical,hybrid")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from kb_ray.embedding.text import TextEmbedder

    pool = GROUPS[args.group] if args.group else VARIANTS
    variants = {name: VARIANTS[name] for name in (args.variants if args.variants is not None else pool)}
    for extra in args.set:
        name, _, overrides = extra.partition("=")
        variants[name] = [o for o in overrides.split(";") if o]
    queries, modes, embedder = load_queries(args.dataset, args.split, args.split_file), tuple(args.modes.split(",")), TextEmbedder()
    print(f"{len(queries)} queries ({args.split or 'all'}) from {args.dataset}")
    results = {}
    for name, overrides in variants.items():
        results[name] = measure(args.kb, overrides, queries, modes, embedder)
        row = " | ".join(f"{mode} R@1 {r['recall@1']:.3f} R@5 {r['recall@5']:.3f} MRR {r['mrr']:.3f}"
                         for mode, r in results[name].items())
        print(f"{name:60s} | {row}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
