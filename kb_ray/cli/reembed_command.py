"""``kb-ray reembed``: a model switch — the new embedder's vectors for every active chunk and
its index generation beside the live one (kb_ray/ingest/reembed.py, docs/model_switch.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    parser = commands.add_parser("reembed", help="embed every active chunk with another embedder and build its "
                                 "index generation beside the live one (switch later with kb-ray index switch)")
    parser.add_argument("--embedder", required=True, metavar="JSON|FILE",
                        help='the new embedding settings, as JSON (\'{"model_path": "...", "model_id": "..."}\') or a '
                        "YAML/JSON file; keys not given keep the configured values")
    parser.add_argument("--batch-texts", type=int, default=512, help="texts embedded and committed per batch")
    parser.add_argument("--no-build", action="store_true", help="embed only; build no generation")
    parser.add_argument("--json", action="store_true")
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kb_ray.cli.progress import duration
    from kb_ray.config import EmbeddingSettings
    from kb_ray.ingest.reembed import reembed

    config = config_from_args(args)
    embedding = EmbeddingSettings.model_validate({**config.embedding.model_dump(), **_settings(args.embedder)})

    def show(event) -> None:
        share = 100 * event.texts_done / max(event.texts_total, 1)
        print(f"reembed: {event.texts_done}/{event.texts_total} texts ({share:.0f}%), "
              f"{event.texts_done / max(event.elapsed_s, 1e-9):.1f} texts/s, {duration(event.elapsed_s)}", flush=True)

    report = reembed(config, embedding=embedding, batch_texts=args.batch_texts, build=not args.no_build,
                     on_progress=None if args.json else show)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.render())
    return 0


def _settings(text: str) -> dict:
    import yaml

    path = Path(text).expanduser()
    loaded = yaml.safe_load(path.read_text() if path.is_file() else text)  # JSON is YAML
    if not isinstance(loaded, dict):
        raise SystemExit(f"kb-ray reembed: --embedder must be a JSON object or a file holding one, got {text!r}")
    return loaded
