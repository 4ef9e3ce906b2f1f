"""The ``kb-ray`` command line. Each subcommand lives in its own module under this package."""

from __future__ import annotations

import argparse
import logging
import sys

from kb_ray.errors import KbRayError

DEFAULT_CONFIG = "conf/local.yaml"


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help=f"YAML config (default: {DEFAULT_CONFIG} if it exists)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value (dotted keys, repeatable)")


def build_parser() -> argparse.ArgumentParser:
    from kb_ray.cli import (
        ask_command,
        catalog_commands,
        demo_command,
        dev_command,
        eval_command,
        index_commands,
        ingest_command,
        keys_command,
        parse_command,
        publish_command,
        reembed_command,
        serve_commands,
        watch_command,
    )

    parser = argparse.ArgumentParser(prog="kb-ray", description="Index documents into a cited knowledge base.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (parse_command, ingest_command, catalog_commands, index_commands, serve_commands, eval_command,
                   demo_command, dev_command, ask_command, keys_command, watch_command, reembed_command,
                   publish_command):
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except KbRayError as exc:
        print(f"kb-ray: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
