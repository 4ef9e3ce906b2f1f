"""``kb-ray eval``: retrieval quality of the live index on a quote-labelled dataset;
``--answers``: answer quality (kb_ray/eval/answers.py); ``export-drafts``: down-voted answers
as unlabelled eval rows (kb_ray/eval/drafts.py)."""

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
    parser.add_argument("action", nargs="?", choices=("export-drafts",),
                        help="export-drafts: write down-voted answers as unlabelled eval-draft JSONL rows")
    parser.add_argument("--out", default=None, metavar="FILE", help="export-drafts: the JSONL file (default: stdout)")
    parser.add_argument("--answers", action="store_true",
                        help="evaluate answers (citation recall/precision, abstention, unsupported sentences)")
    parser.add_argument("--generators", default=None, type=lambda v: tuple(g for g in v.split(",") if g),
                        help="--answers: comma-separated answer generators (default: answer.generator)")
    parser.add_argument("--answers-report", default=None, metavar="PATH",
                        help="--answers: write the Markdown table here and the JSON beside it")
    parser.add_argument("--log-answers", action="store_true",
                        help="--answers: also append the eval's answers to the answers table (default: not)")
    add_eval_arguments(parser)
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The eval options, shared by ``kb-ray eval`` and ``python -m jobs.eval``."""
    from kb_ray.eval.runner import DEFAULT_MODES

    parser.add_argument("--dataset", default=DEFAULT_DATASET, help=f"JSONL queries (default: {DEFAULT_DATASET})")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), type=_modes,
                        help="comma-separated: dense, lexical, hybrid, hybrid+rerank, page, hybrid+page, tree, graph "
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
    parser.add_argument("--contextual-generation", default=None, metavar="GEN",
                        help="also evaluate hybrid search of this (contextual) generation, as mode 'contextual' "
                             "(docs/contextual.md)")
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
    if args.action == "export-drafts":
        return export_drafts(config_from_args(args), args)
    if args.answers:
        return evaluate_answers(config_from_args(args), args)
    return evaluate(config_from_args(args), args)


def export_drafts(config, args: argparse.Namespace) -> int:
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.eval.drafts import draft_rows, write_drafts

    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    rows = draft_rows(catalog)
    text = write_drafts(rows, args.out)
    if args.out is None:
        sys.stdout.write(text)
    print(f"{len(rows)} eval-draft rows{' written to ' + args.out if args.out else ''}", file=sys.stderr)
    return 0


def evaluate_answers(config, args: argparse.Namespace) -> int:
    """Answer the dataset's questions with each generator through ``local_answerer`` and score them."""
    from kb_ray.answer.local import local_answerer
    from kb_ray.embedding.text import TextEmbedder
    from kb_ray.eval import CanonicalTexts, load_dataset
    from kb_ray.eval.answers import render_answers_markdown, run_answer_eval, summarize_answers
    from kb_ray.eval.split import select_split
    from kb_ray.index.generations import read_current

    queries = select_split(load_dataset(args.dataset), dataset=args.dataset, split=args.split)
    embedder = TextEmbedder.from_settings(config.embedding, num_threads=config.search.query_threads)
    answerers = {}
    for name in args.generators or (config.answer.generator,):
        answer = config.answer.model_copy(update={"generator": name, "log": config.answer.log and args.log_answers})
        answerers[name] = local_answerer(config.model_copy(update={"answer": answer}), embedder=embedder)
    texts = CanonicalTexts(_catalog(config))
    result = run_answer_eval(answerers, queries, texts=texts, dataset=args.dataset, split=args.split,
                             generation=read_current(config.kb_root, storage_options=config.storage_options))
    summary = summarize_answers(result)
    print(json.dumps(summary, indent=2, ensure_ascii=False) if args.json else render_answers_markdown(summary))
    if args.answers_report:
        _write_answer_report(summary, result, args.answers_report)
    return 0


def _catalog(config):
    from kb_ray.catalog.delta import DeltaCatalog

    return DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)


def _write_answer_report(summary: dict, result, path: str) -> None:
    from kb_ray.eval.answers import render_answers_markdown

    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    report = Path(path)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(f"# Answer eval\n\n`{command}`\n\n{render_answers_markdown(summary)}\n", encoding="utf-8")
    details = {**summary, "questions": {g.generator["name"]: [q.__dict__ for q in g.queries] for g in result.generators}}
    report.with_suffix(".json").write_text(json.dumps(details, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {report} and {report.with_suffix('.json')}", file=sys.stderr)


def evaluate(config, args: argparse.Namespace) -> int:
    """Run the eval, print tables (or JSON) and write the report; the CLI and the job call this."""
    from kb_ray.eval import load_dataset, run_eval
    from kb_ray.eval.report import render_markdown, summarize, write_reports
    from kb_ray.eval.split import select_split
    from kb_ray.search.searcher import HybridSearcher

    queries = select_split(load_dataset(args.dataset), dataset=args.dataset, split=args.split)
    searcher = HybridSearcher.open(config, generation_id=args.generation)
    contextual = None
    if getattr(args, "contextual_generation", None):
        contextual = HybridSearcher.open(config, generation_id=args.contextual_generation)
    summary = summarize(run_eval(config, queries, modes=args.modes, k=args.k, searcher=searcher, dataset=args.dataset,
                                 naive=not args.no_naive, split=args.split, naive_cache=args.naive_cache,
                                 contextual=contextual))
    print(json.dumps(summary, indent=2, ensure_ascii=False) if args.json else render_markdown(summary))
    if not args.no_report:
        command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
        paths = write_reports(summary, args.report, command=command)
        print(f"wrote {paths[0]} and {paths[1]}", file=sys.stderr)
    return 0
