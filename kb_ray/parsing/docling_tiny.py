"""A tiny random-weight layout model in the folder layout Docling loads, for offline tests.

Docling's standard PDF pipeline needs its layout model (``docling-project/docling-layout-heron``,
an RT-DETR v2 detector) before it converts anything. Tests cannot download it, so
:func:`build_tiny_docling_artifacts` writes a model of the same architecture with about
70k random parameters into ``<out_dir>/docling-project--docling-layout-heron``: ``config.json``
(with Docling's layout labels in ``id2label``), ``model.safetensors`` and
``preprocessor_config.json``, which is what Docling's transformers object-detection engine reads.

Random weights detect nothing meaningful, so the classification heads are biased so that a
few queries score above Docling's thresholds as ``text`` and ``picture``: the pipeline's
downstream path (cells assigned to clusters, picture crops, reading order) then runs. The
boxes are wherever the random weights put them; only the plumbing is exercised, not quality.
"""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)

from kb_ray.parsing.docling_pdf_pipeline import LAYOUT_FOLDER

# The heron model's classes, named as Docling's DocItemLabel values (the engine upper-cases
# them to look the enum up).
LAYOUT_LABELS: tuple[str, ...] = (
    "caption", "footnote", "formula", "list_item", "page_footer", "page_header", "picture",
    "section_header", "table", "text", "title", "document_index", "code", "checkbox_selected",
    "checkbox_unselected", "form", "key_value_region",
)
_IMAGE_SIDE = 128  # the real model uses 640; small keeps inference instant on CPU
_LABEL_BIAS = {"text": 2.5, "picture": 2.0}  # logits; everything else stays near sigmoid(-4)


def build_tiny_docling_artifacts(out_dir: str | Path, *, seed: int = 0) -> str:
    """Write the tiny layout model under ``out_dir`` and return ``out_dir`` as a string,
    ready to be used as ``DoclingPdfSettings.artifacts_path``. Same seed, same weights."""
    import torch
    from transformers import RTDetrV2ForObjectDetection

    folder = Path(out_dir) / LAYOUT_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = RTDetrV2ForObjectDetection(_tiny_config())
    _bias_class_heads(model, seed=seed)
    model.save_pretrained(str(folder))
    _image_processor().save_pretrained(str(folder))
    logger.info("wrote a tiny random-weight layout model to %s", folder)
    return str(out_dir)


def _tiny_config():  # -> RTDetrV2Config
    from transformers import RTDetrResNetConfig, RTDetrV2Config

    backbone = RTDetrResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1], layer_type="basic",
        out_features=["stage2", "stage3", "stage4"],
    )
    width = 16
    return RTDetrV2Config(
        backbone_config=backbone, use_pretrained_backbone=False,
        encoder_in_channels=[width] * 3, encoder_hidden_dim=width, encoder_layers=1,
        encoder_ffn_dim=2 * width, encoder_attention_heads=2,
        d_model=width, decoder_in_channels=[width] * 3, decoder_layers=2,  # 2: weight tying needs >1
        decoder_ffn_dim=2 * width, decoder_attention_heads=2, decoder_n_points=2,
        num_queries=30, num_denoising=0,
        id2label=dict(enumerate(LAYOUT_LABELS)), label2id={name: i for i, name in enumerate(LAYOUT_LABELS)},
    )


def _bias_class_heads(model, *, seed: int) -> None:
    """Small random class weights plus a bias: a mix of confident text and picture queries."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    bias = torch.full((len(LAYOUT_LABELS),), -4.0)
    for name, value in _LABEL_BIAS.items():
        bias[LAYOUT_LABELS.index(name)] = value
    heads = [model.model.enc_score_head, *model.model.decoder.class_embed]
    with torch.no_grad():
        for head in heads:
            head.weight.copy_(torch.randn(head.weight.shape, generator=generator) * 0.5)
            head.bias.copy_(bias)


def _image_processor():
    from transformers import RTDetrImageProcessorPil

    return RTDetrImageProcessorPil(size={"height": _IMAGE_SIDE, "width": _IMAGE_SIDE})
