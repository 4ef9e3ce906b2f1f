"""One eval run over every query of a dataset, reported per split (dev, test, all) from the same hits.

    .venv/bin/python benchmarks/eval_splits.py --kb KB [--dataset benchmarks/realdocs/queries.jsonl]
        [--modes dense,lexical,hybrid] [--naive-cache DIR] [--contextual-generation GEN] [--out DIR]

``kb-ray eval --split dev`` and ``--split test`` are two runs (two naive builds, two sets of
searches); this runs the harness (kb_ray.eval.run_eval, k = 20, the naive reference in the same
process) once on all queries and then summarizes the per-query outcomes of each part of
``<dataset>.split.json``: ranking metrics are per query, so a part's figures are the same as
a run on that part alone. Writes ``eval_<part>.md`` and ``.json`` per part into ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kb_ray.config import load_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", required=True, help="kb_root with the dataset's corpus ingested and indexed")
    parser.add_argument("--dataset", type=Path, default=REPO / "benchmarks" / "realdocs" / "queries.jsonl")
    parser.add_argument("--modes", default="dense,lexical,hybrid")
    parser.add_argument("--naive-cache", default=None)
    parser.add_argument("--contextual-generation", default=None, metavar="GEN",
                        help="also this generation's hybrid, as mode 'contextual' (as kb-ray eval does)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/eval_splits"))
    args = parser.parse_args(argv)

    from kb_ray.eval import load_dataset, run_eval
    from kb_ray.eval.report import render_markdown, summarize, write_reports
    from kb_ray.eval.split import split_path
    from kb_ray.search.searcher import HybridSearcher

    config = load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={args.kb}"])
    queries = load_dataset(args.dataset)
    parts = json.loads(split_path(args.dataset).read_text(encoding="utf-8"))
    searcher = HybridSearcher.open(config)
    contextual = HybridSearcher.open(config, generation_id=args.contextual_generation) \
        if args.contextual_generation else None
    result = run_eval(config, queries, modes=tuple(args.modes.split(",")), k=20, searcher=searcher,
                      dataset=str(args.dataset), naive_cache=args.naive_cache, contextual=contextual)
    command = " ".join(["benchmarks/eval_splits.py", *(argv if argv is not None else sys.argv[1:])])
    for part in ("dev", "test", "all"):
        keep = {q.id for q in queries} if part == "all" else set(parts[part])
        modes = [dataclasses.replace(m, queries=[q for q in m.queries if q.id in keep]) for m in result.modes]
        summary = summarize(dataclasses.replace(result, modes=modes, split=part))
        markdown, _ = write_reports(summary, args.out / f"eval_{part}.md", command=command)
        print(f"## {part} ({len(keep)} queries): {markdown}\n")
        print(render_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
