"""``kb-ray ingest``: run the ingest pipeline and print its report."""

from __future__ import annotations

import argparse
import json

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    parser = commands.add_parser("ingest", help="ingest sources into the catalog (Ray Data → Delta)")
    parser.add_argument("--source", action="append", default=[], metavar="PATH_OR_URI",
                        help="ingest these sources instead of the configured ones (repeatable)")
    parser.add_argument("--sync", choices=["none", "incremental", "full"], default=None,
                        help="what to do with vanished sources (full: tombstone them)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kb_ray.ingest.run import run_ingest

    overrides = list(args.overrides)
    if args.source:
        overrides.append("ingest.sources=" + json.dumps(args.source))
    if args.sync:
        overrides.append(f"ingest.sync={args.sync}")
    args.overrides = overrides
    config = config_from_args(args)
    report = run_ingest(config)
    print(json.dumps(report.to_dict(), indent=2, default=str) if args.json else report.render())
    return 1 if report.documents["failed"] else 0
