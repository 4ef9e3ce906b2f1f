"""Index subcommands: ``build-index`` and ``index list|switch|drop``."""

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
    index = commands.add_parser("index", help="list, switch or drop index generations")
    index.add_argument("action", choices=["list", "switch", "drop"])
    index.add_argument("generation", nargs="?", help="generation id (switch, drop)")
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


def run_index(args: argparse.Namespace) -> int:
    from kb_ray.index import drop_generation, read_current, switch_generation

    config = config_from_args(args)
    root, options = config.kb_root, config.storage_options
    if args.action == "list":
        return _list_generations(config, live=read_current(root, storage_options=options))
    if not args.generation:
        print(f"kb-ray index {args.action}: name a generation id")
        return 2
    if args.action == "switch":
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
