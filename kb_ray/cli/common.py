"""Shared pieces of the subcommands: loading the config the same way everywhere."""

from __future__ import annotations

import argparse
from pathlib import Path

from kb_ray.config import KbConfig, load_config

DEFAULT_CONFIG = Path("conf/local.yaml")


def config_from_args(args: argparse.Namespace) -> KbConfig:
    path = args.config
    if path is None and DEFAULT_CONFIG.is_file():
        path = DEFAULT_CONFIG
    return load_config(path, overrides=args.overrides)
