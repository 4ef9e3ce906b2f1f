"""``kb-ray dev tiny-models --out DIR``: write the tiny random-weight models ``conf/tiny.yaml`` uses."""

from __future__ import annotations

import argparse
from pathlib import Path

TINY_MODELS = ("colqwen2-tiny", "text-tiny", "reranker-tiny", "vlm-tiny", "docling-tiny", "lm-tiny")


def register(commands: argparse._SubParsersAction) -> None:
    dev = commands.add_parser("dev", help="developer tools")
    actions = dev.add_subparsers(dest="dev_command", required=True)
    tiny = actions.add_parser("tiny-models", help="write tiny random-weight models (ColQwen2, text, reranker, VLM, Docling layout, causal LM)")
    tiny.add_argument("--out", default=".tiny-models", help="output folder (default: .tiny-models)")
    tiny.add_argument("--only", action="append", choices=TINY_MODELS, metavar="NAME",
                      help=f"write only this model (repeatable; one of {', '.join(TINY_MODELS)})")
    tiny.set_defaults(handler=run_tiny_models)


def write_tiny_models(out: str | Path, *, only: list[str] | None = None) -> dict[str, str]:
    from kb_ray.dev.tiny_lm import build_tiny_lm
    from kb_ray.embedding.tiny import build_tiny_text_model
    from kb_ray.enrich.tiny_vlm import build_tiny_vlm
    from kb_ray.pages.tiny import build_tiny_colqwen2
    from kb_ray.parsing.docling_tiny import build_tiny_docling_artifacts
    from kb_ray.search.tiny_reranker import build_tiny_cross_encoder

    out = Path(out)
    builders = (build_tiny_colqwen2, build_tiny_text_model, build_tiny_cross_encoder, build_tiny_vlm,
                build_tiny_docling_artifacts, build_tiny_lm)
    return {name: builder(out / name) for name, builder in zip(TINY_MODELS, builders) if not only or name in only}


def run_tiny_models(args: argparse.Namespace) -> int:
    for name, path in write_tiny_models(args.out, only=args.only).items():
        print(f"{name}: {path}")
    return 0
