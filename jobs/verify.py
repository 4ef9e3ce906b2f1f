"""Check the catalog's invariants; exit 1 on violations (no Ray needed)."""

from __future__ import annotations

import json

from jobs._common import job_parser, run_job


def main(config, args) -> int:
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.catalog.verify import verify_catalog

    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    report = verify_catalog(catalog)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.render())
    return 0 if report.ok(strict=args.strict) else 1


def parser():
    p = job_parser("verify", __doc__.splitlines()[0])
    p.add_argument("--strict", action="store_true", help="residue counts as a violation")
    p.add_argument("--json", action="store_true")
    return p


if __name__ == "__main__":
    run_job(parser(), main)
