"""Index subcommands: ``build-index`` and ``index list|switch|drop|refresh|compact``."""

from __future__ import annotations

import argparse
import json

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    build = commands.add_parser("build-index", help="build FAISS + BM25 shards from named catalog versions")
    build.add_argument("--catalog-versions", default=None, metavar="JSON",
                       help='table versions to build from, e.g. \'{"documents": 3, ...}\' (default: latest)')
    build.add_argument("--no-switch", action="store_true", help="build beside the live generation, do not switch")
    build.add_argument("--json", action="store_true")
    add_config_arguments(build)
    build.set_defaults(handler=run_build)
    backfill = commands.add_parser("backfill-concepts", help="extract the concepts of active versions ingested "
                                   "without them (ingested with index.graph off), for index.graph (docs/graph.md)")
    add_config_arguments(backfill)
    backfill.set_defaults(handler=run_backfill_concepts)
    index = commands.add_parser("index", help="list, switch or drop index generations; refresh (delta segment) "
                                "or compact the live one (docs/indexes.md)")
    index.add_argument("action", choices=["list", "switch", "drop", "refresh", "compact"])
    index.add_argument("generation", nargs="?", help="generation id (switch, drop)")
    index.add_argument("--json", action="store_true", help="refresh, compact: print the result as JSON")
    add_config_arguments(index)
    index.set_defaults(handler=run_index)


def run_build(args: argparse.Namespace) -> int:
    from kb_ray.index import build_index

    config = config_from_args(args)
    if args.no_switch:
        config.index.switch_after_build = False
    versions = json.loads(args.catalog_versions) if args.catalog_versions else None
    manifest = build_index(config, catalog_versions=versions)
    summary = {"generation": manifest.generation_id, "rows": manifest.rows, "shards": len(manifest.shards),
               "dense": manifest.spec.get("dense"), "lexical": manifest.lexical_type,
               "catalog_versions": manifest.catalog_versions, "switched": config.index.switch_after_build,
               "stats": manifest.stats}
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(f"built {manifest.generation_id}: {manifest.rows} chunks in {len(manifest.shards)} shards "
              f"({manifest.lexical_type} + faiss), catalog versions {manifest.catalog_versions}"
              + (" — now live" if config.index.switch_after_build else ""))
    return 0


def run_backfill_concepts(args: argparse.Namespace) -> int:
    from kb_ray.ingest.concepts_backfill import backfill_concepts

    report = backfill_concepts(config_from_args(args))
    print(f"concepts of {report.versions} versions ({report.chunks} chunks): {report.mentions} mentions, "
          f"{report.concepts} concept rows")
    return 0


def run_index(args: argparse.Namespace) -> int:
    from kb_ray.index import drop_generation, read_current, switch_generation

    config = config_from_args(args)
    root, options = config.kb_root, config.storage_options
    if args.action in ("refresh", "compact"):
        return _refresh(config, compact_only=args.action == "compact", as_json=args.json)
    if args.action == "list":
        return _list_generations(config, live=read_current(root, storage_options=options))
    if not args.generation:
        print(f"kb-ray index {args.action}: name a generation id")
        return 2
    if args.action == "switch":
        from kb_ray.ingest.reembed import check_generation_embedder

        check_generation_embedder(config, args.generation)
        switch_generation(root, args.generation, storage_options=options)
        print(f"live generation is now {args.generation}")
    else:
        dropped = drop_generation(root, args.generation, storage_options=options)
        print(f"dropped {args.generation}" if dropped else f"{args.generation} was not there")
    return 0


def _list_generations(config, *, live: str | None) -> int:
    from kb_ray.catalog.delta import DeltaCatalog

    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    for row in catalog.read("index_generations").sort_by("created_at").to_pylist():
        marker = "*" if row["generation_id"] == live else " "
        print(f"{marker} {row['generation_id']}  {row['status']}  {row['created_at']}  {row['catalog_versions_json']}")
    return 0


def _refresh(config, *, compact_only: bool, as_json: bool) -> int:
    """``index refresh``: a delta segment (or compaction past index.compact_ratio); ``index compact``:
    fold the live generation's segments into a new base. Both hold the catalog's writer lease."""
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.catalog.lease import writer_lease
    from kb_ray.index.refresh import compact_index, refresh_index

    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    with writer_lease(catalog, config, holder=f"index {'compact' if compact_only else 'refresh'}"):
        result = compact_index(config) if compact_only else refresh_index(config)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    elif result.action == "segment":
        print(f"segment {result.segment} of {result.generation}: {result.rows} chunks of {result.documents} "
              "changed documents")
    elif result.action == "compacted":
        print(f"compacted into {result.generation}: {result.rows} chunks — now live"
              + (f" ({result.detail})" if result.detail else ""))
    else:
        print(f"nothing to refresh: {result.detail}")
    return 0
