"""``kb-ray ingest``: run the ingest pipeline and print its report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    parser = commands.add_parser("ingest", help="ingest sources into the catalog (Ray Data → Delta)")
    parser.add_argument("--source", action="append", default=[], metavar="PATH_OR_URI",
                        help="ingest these sources instead of the configured ones (repeatable)")
    parser.add_argument("--sync", choices=["none", "incremental", "full"], default=None,
                        help="full: tombstone the documents whose files are gone from under the sources "
                        "listed in this run (documents of the collection from other sources are kept); "
                        "none, incremental: tombstone nothing")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kb_ray.cli.progress import ProgressPrinter
    from kb_ray.ingest.run import run_ingest
    from kb_ray.runtime import ray_log_dir

    overrides = list(args.overrides)
    if args.source:
        overrides.append("ingest.sources=" + json.dumps([source_from_here(source) for source in args.source]))
    if args.sync:
        overrides.append(f"ingest.sync={args.sync}")
    args.overrides = overrides
    config = config_from_args(args)
    progress = ProgressPrinter()
    try:
        report = run_ingest(config, on_progress=progress, verbose=args.verbose)
    finally:
        progress.close()
    if not args.verbose and ray_log_dir():
        print(f"Ray's own logs: {ray_log_dir()} (kb-ray -v ingest shows them here)", file=sys.stderr)
    print(json.dumps(report.to_dict(), indent=2, default=str) if args.json else report.render())
    return 1 if report.documents["failed"] else 0


def source_from_here(source: str) -> str:
    """A relative --source is relative to where the command runs, not to the config file."""
    return source if "://" in source else str(Path(source).expanduser().resolve())
