"""``kb-ray parse PATH``: parse, structure and chunk one file; print it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kb_ray.cli.common import config_from_args
from kb_ray.errors import SourceError
from kb_ray.export import version_to_dict
from kb_ray.model import DocumentVersion
from kb_ray.processing import DocumentProcessor


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    parser = commands.add_parser("parse", help="parse one file and print its elements and chunks")
    parser.add_argument("path", help="the file to parse")
    parser.add_argument("--json", action="store_true", help="print the document version as JSON")
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    path = Path(args.path)
    if not path.is_file():
        raise SourceError(f"{path} is not a file")
    processor = DocumentProcessor(parse=config.parse, chunking=config.chunking)  # captions need the ingest
    version = processor.process(path.read_bytes(), collection=config.ingest.collection,
                                key=path.resolve().as_posix(), filename=path.name)
    if args.json:
        print(json.dumps(version_to_dict(version), ensure_ascii=False, indent=2))
    else:
        print(summary(version, name=path.name))
    return 0 if version.status != "failed" else 1


def summary(version: DocumentVersion, *, name: str) -> str:
    if version.status == "failed":
        return f"{name}: FAILED ({version.error})"
    kinds: dict[str, int] = {}
    for element in version.elements:
        kinds[element.kind] = kinds.get(element.kind, 0) + 1
    lines = [
        f"{name}: {version.mime} via {version.parser}, {len(version.pages)} pages, "
        f"{len(version.canonical_text)} chars, {len(version.elements)} elements, {len(version.chunks)} chunks",
        "  elements: " + ", ".join(f"{kind}={count}" for kind, count in sorted(kinds.items()))
        + (f"; {len(version.images)} figure crops" if version.images else ""),
        *(f"  note: {note}" for note in version.notes),
    ]
    for placed in version.chunks[:50]:
        where = f"p{','.join(map(str, placed.pages))}" if placed.pages else "-"
        heading = " > ".join(placed.chunk.heading_path)[:50]
        preview = placed.text.replace("\n", " ")[:70]
        lines.append(f"  [{placed.ordinal:>3}] {placed.chunk.token_count:>4} tok {where:<6} {heading:<50} {preview}")
    return "\n".join(lines)
