"""Delete tombstoned documents and every row only they referenced (no Ray needed)."""

from __future__ import annotations

from jobs._common import job_parser, run_job


def main(config, args) -> int:
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.catalog.purge import purge

    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    print(purge(catalog, superseded=args.superseded).render())
    return 0


def parser():
    p = job_parser("purge", __doc__.splitlines()[0])
    p.add_argument("--superseded", action="store_true", help="also delete versions no document points at")
    return p


if __name__ == "__main__":
    run_job(parser(), main)
