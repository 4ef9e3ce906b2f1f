"""What `kb-ray demo` prints around Ray: Serve's console INFO quieted, and the viewer hint that
repeats the demo's own config arguments (docs/viewer.md)."""

from __future__ import annotations

import argparse
import logging

from kb_ray.cli.demo_command import config_args_line, viewer_hint
from kb_ray.config import load_config


def test_serve_console_handler_is_quieted_after_its_import():
    from ray import serve  # noqa: F401  (the import attaches Serve's console handler at INFO)

    from kb_ray.runtime import quiet_ray_console

    consoles = [h for h in logging.getLogger("ray.serve").handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    assert consoles, "ray.serve no longer attaches a console handler: revisit quiet_ray_console"
    quiet_ray_console()
    assert all(handler.level == logging.WARNING for handler in consoles)


def test_viewer_hint_repeats_the_config_arguments(tmp_path):
    args = argparse.Namespace(config="conf/local.yaml", overrides=[f"kb_root={tmp_path}/my kb"])
    line = config_args_line(args)
    assert line == f" --config conf/local.yaml '--set=kb_root={tmp_path}/my kb'"
    config = load_config("conf/local.yaml", overrides=["serve.port=8123"])
    hint = viewer_hint(config, args_line=line)
    assert f"`kb-ray serve{line}`" in hint and "http://127.0.0.1:8123/ui" in hint
