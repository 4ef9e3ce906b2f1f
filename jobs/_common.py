"""What every job shares: ``--config`` / ``--set`` parsing, logging the resolved config and
code version, and a one-line, non-zero exit on a ``KbRayError``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from kb_ray.config import KbConfig, config_json, load_config
from kb_ray.errors import KbRayError

DEFAULT_CONFIG = "conf/local.yaml"
logger = logging.getLogger("jobs")


def job_parser(name: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m jobs.{name}", description=description)
    parser.add_argument("--config", default=DEFAULT_CONFIG, help=f"YAML config (default: {DEFAULT_CONFIG})")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value (dotted keys, repeatable)")
    return parser


def run_job(parser: argparse.ArgumentParser, main: Callable[[KbConfig, argparse.Namespace], int]) -> None:
    """Parse arguments, load the config, call ``main(config, args)`` and exit with its code."""
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        from kb_ray.runtime import code_version

        config = load_config(args.config, overrides=args.overrides)
        logger.info("%s: code version %s, config %s", parser.prog, code_version(), config_json(config))
        code = int(main(config, args) or 0)
    except KbRayError as exc:
        reason = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        print(f"{parser.prog}: error: {reason}", file=sys.stderr)
        code = 2
    sys.exit(code)
