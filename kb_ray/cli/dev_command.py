"""``kb-ray dev tiny-models --out DIR``: write the tiny random-weight models ``conf/tiny.yaml`` uses."""

from __future__ import annotations

import argparse
from pathlib import Path

TINY_MODELS = ("colqwen2-tiny", "text-tiny", "reranker-tiny", "vlm-tiny", "docling-tiny")


def register(commands: argparse._SubParsersAction) -> None:
    dev = commands.add_parser("dev", help="developer tools")
    actions = dev.add_subparsers(dest="dev_command", required=True)
    tiny = actions.add_parser("tiny-models", help="write tiny random-weight models (ColQwen2, text, reranker, VLM, Docling layout)")
    tiny.add_argument("--out", default=".tiny-models", help="output folder (default: .tiny-models)")
    tiny.set_defaults(handler=run_tiny_models)


def write_tiny_models(out: str | Path) -> dict[str, str]:
    from kb_ray.embedding.tiny import build_tiny_text_model
    from kb_ray.enrich.tiny_vlm import build_tiny_vlm
    from kb_ray.pages.tiny import build_tiny_colqwen2
    from kb_ray.parsing.docling_tiny import build_tiny_docling_artifacts
    from kb_ray.search.tiny_reranker import build_tiny_cross_encoder

    out = Path(out)
    builders = (build_tiny_colqwen2, build_tiny_text_model, build_tiny_cross_encoder, build_tiny_vlm,
                build_tiny_docling_artifacts)
    return {name: builder(out / name) for name, builder in zip(TINY_MODELS, builders)}


def run_tiny_models(args: argparse.Namespace) -> int:
    for name, path in write_tiny_models(args.out).items():
        print(f"{name}: {path}")
    return 0
