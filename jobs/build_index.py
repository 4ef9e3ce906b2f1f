"""Build an index generation (FAISS + BM25 shards) from named catalog versions (no Ray needed)."""

from __future__ import annotations

import json

from jobs._common import job_parser, run_job


def main(config, args) -> int:
    from kb_ray.index import build_index

    if args.no_switch:
        config.index.switch_after_build = False
    versions = json.loads(args.catalog_versions) if args.catalog_versions else None
    manifest = build_index(config, catalog_versions=versions)
    print(f"built {manifest.generation_id}: {manifest.rows} chunks in {len(manifest.shards)} shards, "
          f"catalog versions {manifest.catalog_versions}" + (" — now live" if config.index.switch_after_build else ""))
    return 0


def parser():
    p = job_parser("build_index", __doc__.splitlines()[0])
    p.add_argument("--catalog-versions", default=None, metavar="JSON", help="table versions (default: latest)")
    p.add_argument("--no-switch", action="store_true", help="build beside the live generation, do not switch")
    return p


if __name__ == "__main__":
    run_job(parser(), main)
