"""``kb-ray eval``: retrieval quality of the live index on a quote-labelled dataset."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kb_ray.cli.common import config_from_args

DEFAULT_DATASET = "golden/queries.jsonl"
DEFAULT_REPORT = "benchmarks/results/eval.md"


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    parser = commands.add_parser("eval", help="measure retrieval quality on a quote-labelled query set")
    add_eval_arguments(parser)
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The eval options, shared by ``kb-ray eval`` and ``python -m jobs.eval``."""
    from kb_ray.eval.runner import DEFAULT_MODES

    parser.add_argument("--dataset", default=DEFAULT_DATASET, help=f"JSONL queries (default: {DEFAULT_DATASET})")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), type=_modes,
                        help="comma-separated: dense, lexical, hybrid, hybrid+rerank, page, hybrid+page "
                             f"(default: {','.join(DEFAULT_MODES)})")
    parser.add_argument("--split", default="all", choices=("dev", "test", "all"),
                        help="queries of this part of the dataset's <stem>.split.json (dev: for tuning; "
                             "test: for reporting; default: all)")
    parser.add_argument("--no-naive", action="store_true",
                        help="skip the naive reference retriever (run by default next to dense/lexical/hybrid)")
    parser.add_argument("--naive-cache", default=None, metavar="DIR",
                        help="keep the naive reference's window vectors in DIR and reuse them (default: none)")
    parser.add_argument("--k", type=int, default=20, help="hits per query (default: 20)")
    parser.add_argument("--generation", default=None, help="evaluate this index generation (default: the live one)")
    parser.add_argument("--report", default=DEFAULT_REPORT,
                        help=f"Markdown report path; the JSON goes beside it (default: {DEFAULT_REPORT})")
    parser.add_argument("--no-report", action="store_true", help="do not write the report files")
    parser.add_argument("--json", action="store_true", help="print the JSON summary instead of the tables")


def _modes(value: str) -> tuple[str, ...]:
    from kb_ray.eval.runner import EVAL_MODES

    modes = tuple(m.strip() for m in value.split(",") if m.strip())
    unknown = [m for m in modes if m not in EVAL_MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"unknown mode(s) {', '.join(unknown) or '(none)'}; use {', '.join(EVAL_MODES)}")
    return modes


def run(args: argparse.Namespace) -> int:
    return evaluate(config_from_args(args), args)


def evaluate(config, args: argparse.Namespace) -> int:
    """Run the eval, print tables (or JSON) and write the report; the CLI and the job call this."""
    from kb_ray.eval import load_dataset, run_eval
    from kb_ray.eval.report import render_markdown, summarize, write_reports
    from kb_ray.eval.split import select_split
    from kb_ray.search.searcher import HybridSearcher

    queries = select_split(load_dataset(args.dataset), dataset=args.dataset, split=args.split)
    searcher = HybridSearcher.open(config, generation_id=args.generation)
    summary = summarize(run_eval(config, queries, modes=args.modes, k=args.k, searcher=searcher, dataset=args.dataset,
                                 naive=not args.no_naive, split=args.split, naive_cache=args.naive_cache))
    print(json.dumps(summary, indent=2, ensure_ascii=False) if args.json else render_markdown(summary))
    if not args.no_report:
        command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
        paths = write_reports(summary, args.report, command=command)
        print(f"wrote {paths[0]} and {paths[1]}", file=sys.stderr)
    return 0
