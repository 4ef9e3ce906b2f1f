"""Compact, checkpoint and vacuum the catalog, keeping every version an index generation uses."""

from __future__ import annotations

from jobs._common import job_parser, run_job


def main(config, args) -> int:
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.catalog.maintenance import maintain

    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    print(maintain(catalog, retention_hours=args.retention_hours, vacuum=not args.no_vacuum,
                   z_order=args.z_order).render())
    return 0


def parser():
    p = job_parser("maintain", __doc__.splitlines()[0])
    p.add_argument("--retention-hours", type=int, default=168, help="vacuum files older than this (default 7 days)")
    p.add_argument("--no-vacuum", action="store_true", help="compact and checkpoint only")
    p.add_argument("--z-order", action="store_true", help="rewrite each table clustered by its key columns")
    return p


if __name__ == "__main__":
    run_job(parser(), main)
