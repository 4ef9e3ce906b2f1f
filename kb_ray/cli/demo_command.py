"""``kb-ray demo``: the embedded default end to end on ``golden/``.

Ingests the golden documents into ``kb_root`` (``.kb/`` by default), prints the run report,
a DuckDB summary of the catalog and the verify result, builds the index, starts the Ray
Serve app on 127.0.0.1, asks a few questions over HTTP, prints cited hits, then asks
``POST /v1/answer`` one question and prints its cited extractive answer, shuts down.
"""

from __future__ import annotations

import argparse
import os

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    parser = commands.add_parser("demo", help="ingest golden/ on the embedded default and show the catalog")
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


DEMO_SUMMARY_SQL = """
SELECT d.collection, v.mime, count(*) AS documents, sum(v.n_pages) AS pages, sum(v.n_chunks) AS chunks
FROM active_documents d JOIN versions v ON v.version_id = d.active_version_id
GROUP BY ALL ORDER BY documents DESC, mime
"""


def run(args: argparse.Namespace) -> int:
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.catalog.sql import run_query
    from kb_ray.catalog.verify import verify_catalog
    from kb_ray.cli.catalog_commands import render_table
    from kb_ray.ingest.run import run_ingest

    config = config_from_args(args)
    print(f"== ingest {', '.join(config.ingest.source_uris)} -> {config.kb_root}")
    report = run_ingest(config, verbose=args.verbose)
    print(report.render())
    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    print("\n== catalog (DuckDB over Delta)")
    print(render_table(run_query(catalog, DEMO_SUMMARY_SQL)))
    verified = verify_catalog(catalog)
    print(f"\n== verify: {'OK' if verified.ok() else 'VIOLATIONS'}")
    if not verified.ok():
        return 1
    return ask_questions(config, verbose=args.verbose, config_args_line=config_args_line(args))


def config_args_line(args: argparse.Namespace) -> str:
    """The demo's own ``--config`` / ``--set`` arguments, to repeat in the commands it suggests."""
    import shlex

    parts = (["--config", args.config] if args.config else []) + [f"--set={item}" for item in args.overrides]
    return "".join(f" {shlex.quote(part)}" for part in parts)


DEMO_QUESTIONS = (
    "What is the part number of the mechanical seal kit?",
    "How many eelgrass shoots were transplanted?",
    "How much does a CycleLink day pass cost?",
    "Who won the 1998 football world cup?",  # not in golden/: the service should abstain
)
DEMO_ANSWER_QUESTION = "How many eelgrass shoots were transplanted in Halvik Bay?"


def ask_questions(config, *, verbose: bool = False, config_args_line: str = "") -> int:
    import httpx

    from kb_ray.index import build_index
    from kb_ray.runtime import stop_ray
    from kb_ray.serving.api import abstain_line, citation_line
    from kb_ray.serving.app import start_service, stop_service

    manifest = build_index(config)
    print(f"\n== index generation {manifest.generation_id}: {manifest.rows} chunks, {len(manifest.shards)} shards")
    start_service(config, verbose=verbose)
    url = f"http://{config.serve.host}:{config.serve.port}"
    try:
        for question in DEMO_QUESTIONS:
            result = httpx.post(f"{url}/v1/search", json={"query": question, "k": 3}, timeout=120).json()
            note = "reranked" if result["reranked"] else "not reranked: no cross-encoder ships in a PyPI package"
            print(f"\n== Q: {question}  ({note}, {result['timing_ms']['total_service']:.0f} ms)")
            print(f"  {abstain_line(result)}")
            for rank, hit in enumerate(result["hits"], start=1):
                print(f"  [{rank}] {citation_line(hit)}")
        show_answer(url, DEMO_ANSWER_QUESTION)
    finally:
        # a local instance goes whole, Serve with it (serve.shutdown's controller kill prints a Ray error line)
        stop_service() if (config.ray.address or os.environ.get("RAY_ADDRESS")) else stop_ray()
    print(viewer_hint(config, args_line=config_args_line))
    return 0


def viewer_hint(config, *, args_line: str) -> str:
    """How to look at the same knowledge base in the browser viewer (docs/viewer.md)."""
    command = f"kb-ray serve{args_line}"
    return (f"\n== viewer: run `{command}`, then open http://{config.serve.host}:{config.serve.port}/ui "
            "(search, answers, the cited box on the page)")


def show_answer(url: str, question: str) -> None:
    """``POST /v1/answer`` and the answer as ``kb-ray ask`` prints it."""
    import httpx

    from kb_ray.cli.ask_command import render_answer

    reply = httpx.post(f"{url}/v1/answer", json={"query": question}, timeout=300)
    reply.raise_for_status()
    print(f"\n== answer (POST /v1/answer, extractive): {question}")
    print("  " + render_answer(reply.json()).replace("\n", "\n  "))
