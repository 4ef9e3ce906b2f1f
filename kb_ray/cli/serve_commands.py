"""``kb-ray serve`` (the Ray Serve app on 127.0.0.1) and ``kb-ray search`` (its HTTP client)."""

from __future__ import annotations

import argparse
import json
import time

from kb_ray.cli.catalog_commands import _point
from kb_ray.cli.common import config_from_args
from kb_ray.serving.api import abstain_line, context_pieces


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    serve = commands.add_parser("serve", help="serve /v1/search on 127.0.0.1 with Ray Serve")
    serve.add_argument("--port", type=int, default=None, help="default: serve.port from config (8000)")
    add_config_arguments(serve)
    serve.set_defaults(handler=run_serve)
    search = commands.add_parser("search", help="query a running kb-ray serve over HTTP (or --local)")
    search.add_argument("query")
    search.add_argument("--k", type=int, default=10)
    search.add_argument("--mode", default="hybrid", help="hybrid | dense | lexical | page | hybrid+page | tree | graph")
    search.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE",
                        help="e.g. collection=default, mime=application/pdf, tags_any=a,b, acl_any=p,q, metadata.team=x (repeatable)")
    search.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None)
    search.add_argument("--context-chars", type=int, default=0,
                        help="also print up to this many characters of each hit's neighbouring chunks")
    search.add_argument("--evidence", choices=("none", "lexical", "hybrid"), default=None,
                        help="how each hit's evidence passage is chosen (default: search.evidence); hybrid "
                        "also embeds the first hits' sentences: better passages, slower (docs/search.md)")
    search.add_argument("--as-of", type=_point, default=None, metavar="VERSION|TIMESTAMP",
                        help="search the catalog as it was: a documents table version, or an ISO-8601 time "
                        "(docs/search.md); refused when no retained index generation covers it")
    search.add_argument("--url", default=None, help="service URL (default: http://serve.host:serve.port)")
    search.add_argument("--local", action="store_true", help="search the local catalog in-process, no service")
    search.add_argument("--api-key", default=None, help="key for a service with serve.auth.enabled "
                        "(default: $KB_RAY_API_KEY)")
    search.add_argument("--json", action="store_true")
    add_config_arguments(search)
    search.set_defaults(handler=run_search)


def run_serve(args: argparse.Namespace) -> int:
    from kb_ray.serving.app import start_service, stop_service

    config = config_from_args(args)
    port = args.port or config.serve.port
    start_service(config, port=port, verbose=args.verbose)
    print(f"kb-ray search service on http://{config.serve.host}:{port} (viewer at /ui, API docs at /docs); "
          "Ctrl-C stops it")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stop_service()
    return 0


def parse_filter_args(items: list[str]) -> dict[str, object] | None:
    """``key=value`` pairs into the filter dict; list fields take comma-separated values."""
    lists = {"document_ids", "tags_any", "tags_all", "acl_any"}
    result: dict[str, object] = {}
    for item in items:
        key, _, value = item.partition("=")
        if key.startswith("metadata."):
            result.setdefault("metadata", {})[key.split(".", 1)[1]] = value  # type: ignore[index]
        else:
            result[key] = value.split(",") if key in lists else value
    return result or None


def as_of_body(point) -> dict[str, object]:
    """``--as-of`` as the request's ``as_of``: a version number or a timestamp."""
    return {"catalog_version": point} if isinstance(point, int) else {"timestamp": point.isoformat()}


def search_locally(config, body: dict[str, object]) -> dict[str, object]:
    """The ``/v1/search`` answer computed in-process over the live generation of ``kb_root`` (or,
    with ``as_of``, the generation and gate that point resolves to: kb_ray/search/as_of.py)."""
    from kb_ray.search.searcher import HybridSearcher

    pinned: dict[str, object] = {}
    if as_of := body.get("as_of"):
        from kb_ray.catalog.delta import DeltaCatalog
        from kb_ray.search.as_of import choose_target

        catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
        target = choose_target(catalog, as_of, kb_root=config.kb_root, storage_options=config.storage_options)
        pinned = {"generation_id": target.generation_id, "gate_version": target.documents_version}
    searcher = HybridSearcher.open(config, **pinned)  # the reranker too, when search.rerank_model_path is set
    result = searcher.search(body["query"], k=body["k"], mode=body["mode"], filters=body["filter"],
                             rerank=body["rerank"], context_chars=body["context_chars"],
                             evidence=body.get("evidence")).to_dict()
    return {**result, "as_of": {"documents_version": pinned["gate_version"]}} if pinned else result


def run_search(args: argparse.Namespace) -> int:
    from kb_ray.cli.service_client import post_to_service
    from kb_ray.serving.api import citation_line

    config = config_from_args(args)
    url = args.url or f"http://{config.serve.host}:{config.serve.port}"
    body = {"query": args.query, "k": args.k, "mode": args.mode, "filter": parse_filter_args(args.filter),
            "rerank": args.rerank, "context_chars": args.context_chars}
    if args.evidence is not None:
        body["evidence"] = args.evidence
    if args.as_of is not None:
        body["as_of"] = as_of_body(args.as_of)
    if args.local:
        result = search_locally(config, body)
    else:
        result = post_to_service(url, "/v1/search", body, api_key=args.api_key, timeout_s=60,
                                 local_hint="search the local catalog in-process with --local")
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    timing = result["timing_ms"]
    as_of = f" as of documents version {result['as_of']['documents_version']}" if result.get("as_of") else ""
    print(f"{len(result['hits'])} hits from generation {result['generation']}{as_of} "
          f"({'reranked' if result['reranked'] else 'not reranked'}, "
          f"{timing.get('total_service', timing.get('total', 0)):.0f} ms)")
    print(abstain_line(result))
    for rank, hit in enumerate(result["hits"], start=1):
        print(f"[{rank}] {citation_line(hit)}")
        for piece in context_pieces(hit):
            print(f"      context: {piece}")
    return 0
