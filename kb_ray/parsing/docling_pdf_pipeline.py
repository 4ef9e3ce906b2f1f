"""Docling's standard PDF pipeline built from :class:`DoclingPdfSettings`, offline only.

Weights load from ``settings.artifacts_path`` and nowhere else: :func:`missing_models`
checks the folders Docling will read (and the optional packages the enabled stages import)
before anything is built, so a missing model is a clear failed result instead of a hub
download attempt or a stack trace. :func:`build_pdf_converter` then turns the settings into
``PdfPipelineOptions``.

Folder layout under ``artifacts_path`` (what ``docling-tools models download`` writes):
  * ``docling-project--docling-layout-heron``: the layout model (always needed);
  * ``docling-project--docling-models/model_artifacts/tableformer/{accurate,fast}``: TableFormer,
    needed when ``do_table_structure`` is on, together with the ``docling_ibm_models`` package.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb_ray.config import DoclingPdfSettings
from kb_ray.errors import ParseError

if TYPE_CHECKING:
    from docling.document_converter import DocumentConverter

logger = logging.getLogger(__name__)

LAYOUT_REPO_ID = "docling-project/docling-layout-heron"
LAYOUT_FOLDER = LAYOUT_REPO_ID.replace("/", "--")
TABLEFORMER_FOLDER = "docling-project--docling-models/model_artifacts/tableformer"
_FETCH_HINT = ("fetch them with `docling-tools models download` where a model hub is reachable "
               "and set parse.docling.artifacts_path to that folder")
_OCR_PACKAGES = {"rapidocr": ("rapidocr", "onnxruntime"), "easyocr": ("easyocr",)}
_TABLEFORMER_V2_MODULE = "docling.models.stages.table_structure.table_structure_model_v2"


def missing_models(settings: DoclingPdfSettings) -> ParseError | None:
    """The first model or package the configured pipeline needs that is not here, as the
    error to report; ``None`` when everything is in place. Cheap: only stats and lookups."""
    if settings.artifacts_path is None:
        return ParseError("model_unavailable", f"parse.docling.artifacts_path is not set; docling's layout "
                                               f"weights ({LAYOUT_FOLDER}) load only from there; {_FETCH_HINT}")
    layout = Path(settings.artifacts_path) / LAYOUT_FOLDER
    if not (layout / "config.json").is_file():
        return ParseError("model_unavailable", f"docling layout weights not found at {layout}; {_FETCH_HINT}")
    if settings.do_table_structure:
        problem = _missing_tableformer(settings)
        if problem:
            return problem
    if settings.do_ocr:
        return _missing_ocr_engine(settings.ocr_engine)
    return None


def _missing_tableformer(settings: DoclingPdfSettings) -> ParseError | None:
    folder = Path(settings.artifacts_path or ".") / TABLEFORMER_FOLDER / settings.table_mode
    if not (folder / "tm_config.json").is_file():
        return ParseError("model_unavailable", f"TableFormer weights not found at {folder}; {_FETCH_HINT}, "
                                               "or set parse.docling.do_table_structure: false")
    if importlib.util.find_spec("docling_ibm_models") is None:
        return ParseError("model_unavailable", "TableFormer needs the docling_ibm_models package: "
                                               "pip install 'kb-ray[docling]' (GPU images), or set "
                                               "parse.docling.do_table_structure: false")
    return None


def _missing_ocr_engine(engine: str) -> ParseError | None:
    if engine == "tesseract":
        found = shutil.which("tesseract") is not None
        hint = "install the tesseract binary (apt-get install tesseract-ocr)"
    else:
        found = all(importlib.util.find_spec(name) is not None for name in _OCR_PACKAGES[engine])
        hint = f"pip install {' '.join(_OCR_PACKAGES[engine])}"
    if found:
        return None
    return ParseError("ocr_unavailable", f"OCR engine {engine!r} is not installed: {hint}, "
                                         "or set parse.docling.do_ocr: false")


def build_pdf_converter(settings: DoclingPdfSettings, *, document_timeout: float | None) -> DocumentConverter:
    """A converter for PDFs only, with the standard pipeline configured from ``settings``.
    Models load on the first conversion (or :meth:`DocumentConverter.initialize_pipeline`)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # artifacts_path is set: no download anyway
    _stand_in_for_tableformer_v2_without_torchvision()
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter, PdfFormatOption

    options = pipeline_options(settings, document_timeout=document_timeout)
    return DocumentConverter(allowed_formats=[InputFormat.PDF],
                             format_options={InputFormat.PDF: PdfFormatOption(pipeline_options=options)})


def pipeline_options(settings: DoclingPdfSettings, *, document_timeout: float | None) -> Any:
    """``PdfPipelineOptions`` for ``settings`` (returned as ``Any``: docling stays a lazy import)."""
    from docling.datamodel.accelerator_options import AcceleratorOptions
    from docling.datamodel.pipeline_options import (
        PdfPipelineOptions,
        TableFormerMode,
        TableStructureOptions,
    )

    return PdfPipelineOptions(
        artifacts_path=settings.artifacts_path,
        accelerator_options=AcceleratorOptions(device=settings.device, num_threads=settings.num_threads),
        document_timeout=document_timeout,
        do_table_structure=settings.do_table_structure,
        table_structure_options=TableStructureOptions(mode=TableFormerMode(settings.table_mode)),
        do_ocr=settings.do_ocr,
        ocr_options=_ocr_options(settings),
        layout_batch_size=settings.layout_batch_size,
        table_batch_size=settings.table_batch_size,
        ocr_batch_size=settings.ocr_batch_size,
        images_scale=settings.images_scale,
        generate_picture_images=True,
    )


def _ocr_options(settings: DoclingPdfSettings) -> Any:
    from docling.datamodel import pipeline_options as po

    mode = po.OcrMode.FULL_PAGE if settings.force_full_page_ocr else po.OcrMode.DEFAULT
    if settings.ocr_engine == "rapidocr":
        return po.RapidOcrOptions(backend="onnxruntime", mode=mode, **rapidocr_model_paths(settings.artifacts_path))
    if settings.ocr_engine == "easyocr":
        return po.EasyOcrOptions(mode=mode)
    return po.TesseractCliOcrOptions(mode=mode)


def rapidocr_model_paths(artifacts_path: str | None) -> dict[str, str]:
    """The ONNX models inside the rapidocr wheel, unless ``artifacts_path`` has its own
    ``RapidOcr`` folder (``docling-tools models download rapidocr``). With an artifacts path
    Docling never downloads, and without explicit paths it would refuse to run OCR; the
    wheel's models (PP-OCR detection, direction classifier, recognition) need no download."""
    if artifacts_path and (Path(artifacts_path) / "RapidOcr").is_dir():
        return {}
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or not spec.submodule_search_locations:
        return {}
    models = Path(next(iter(spec.submodule_search_locations))) / "models"
    found = {}
    for role, pattern in (("det_model_path", "*_det_*.onnx"), ("cls_model_path", "*_cls_*.onnx"),
                          ("rec_model_path", "*_rec_*.onnx")):
        candidates = sorted(models.glob(pattern))
        if candidates:
            found[role] = str(candidates[-1])
    return found if len(found) == 3 else {}


def _stand_in_for_tableformer_v2_without_torchvision() -> None:
    """Let the standard pipeline start where torchvision cannot be imported.

    Docling registers every table-structure engine when it builds the pipeline, and the
    TableFormer v2 module imports torchvision at module level, even when table structure is
    off or uses TableFormer v1. Only when torchvision is not importable (CPU images pin a
    torch that PyPI's torchvision does not match), register a stand-in for that one module
    whose class refuses to be constructed with a clear message. Images built with the
    ``docling`` extra have torchvision and never reach this.
    """
    if _TABLEFORMER_V2_MODULE in sys.modules:
        return
    try:
        import torchvision  # noqa: F401
        return
    except Exception:  # absent, or present but built for another torch
        pass
    from docling.datamodel.pipeline_options import TableStructureV2Options

    class TableStructureModelV2:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError("TableFormer v2 needs torchvision: pip install 'kb-ray[docling]'")

        @classmethod
        def get_options_type(cls) -> type[TableStructureV2Options]:
            return TableStructureV2Options

    stand_in = types.ModuleType(_TABLEFORMER_V2_MODULE)
    stand_in.TableStructureModelV2 = TableStructureModelV2  # type: ignore[attr-defined]
    sys.modules[_TABLEFORMER_V2_MODULE] = stand_in
    logger.debug("torchvision not importable; registered a stand-in for %s", _TABLEFORMER_V2_MODULE)
