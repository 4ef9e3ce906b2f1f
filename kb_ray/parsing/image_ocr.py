"""Images as documents: PNG, JPEG, TIFF (one page per frame) and WebP through RapidOCR.

Pillow decodes each page within ``parse.max_image_pixels`` (:mod:`kb_ray.parsing.image_frames`);
RapidOCR (PP-OCR detection, angle classification and recognition models on onnxruntime,
shipped inside the rapidocr wheel, so nothing is downloaded) finds text lines as pixel
polygons. Lines become ``paragraph`` blocks: a line continues the paragraph above it when
it overlaps it horizontally, has a similar height and starts within ``paragraph_gap`` line
heights of it. Paragraphs are read top to bottom, and left to right within a row.

Coordinates follow the other parsers: a page's ``width``/``height`` are its pixel size,
i.e. points at 72 dpi (a file's dpi tag is often missing or wrong, and normalized boxes do
not depend on it); every block's ``bbox`` and ``attrs["lines"]`` boxes are normalized to
[0, 1], origin top-left. ``has_text_layer`` is false: the text is recognised, not read.

The engine (about 3 s to load) is built once per parser instance, on the first image, and
its own console logging is routed through stdlib logging at WARNING.
"""

from __future__ import annotations

import importlib.metadata
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from kb_ray.errors import ParseError
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import Block, PageInfo, ParseResult, normalize_bbox
from kb_ray.parsing.image_frames import image_frames
from kb_ray.parsing.mime import IMAGE_MIMES

logger = logging.getLogger(__name__)

OCR_MODELS = {  # the models the rapidocr wheel ships; any other would be downloaded, so they are fixed
    "det": ("PP-OCRv6", "small", "ch"),
    "cls": ("PP-OCRv4", "mobile", "ch"),
    "rec": ("PP-OCRv6", "small", "ch"),
}


@dataclass(frozen=True)
class OcrLine:
    """One recognised line: its text, confidence and box in page pixels (top-left origin)."""

    text: str
    score: float
    x0: float
    top: float
    x1: float
    bottom: float

    @property
    def height(self) -> float:
        return self.bottom - self.top


class ImageOcrParser(Parser):
    """OCR of raster images; every frame of a TIFF is a page."""

    name = "image_ocr"
    version = "1"
    mimes = IMAGE_MIMES

    def __init__(self, *, min_score: float = 0.5, paragraph_gap: float = 0.8, num_threads: int = 1) -> None:
        """``min_score``: lines recognised with less confidence are dropped. ``num_threads``:
        onnxruntime threads (one: the pipeline runs one parse worker per CPU)."""
        self.min_score = min_score
        self.paragraph_gap = paragraph_gap
        self.num_threads = num_threads
        self._engine: Any = None

    def config(self) -> dict[str, Any]:
        return {"engine": f"rapidocr {_rapidocr_version()}", "models": OCR_MODELS, "min_score": self.min_score,
                "paragraph_gap": self.paragraph_gap, "grouping": "paragraphs-v1"}

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        pages: list[PageInfo] = []
        blocks: list[Block] = []
        for page_no, frame in image_frames(data, limits=limits):
            info = PageInfo(page_no=page_no, width=float(frame.width), height=float(frame.height), has_text_layer=False)
            pages.append(info)
            lines = self.recognise(np.asarray(frame)[:, :, ::-1])  # RapidOCR reads arrays as BGR
            blocks += page_blocks(lines, info=info, paragraph_gap=self.paragraph_gap)
        return ParseResult(status="ok", parser=self.name, mime=mime, blocks=blocks, pages=pages)

    def recognise(self, bgr: np.ndarray) -> list[OcrLine]:
        """The text lines RapidOCR finds in one BGR page at ``min_score`` or better."""
        try:
            output = self.engine()(np.ascontiguousarray(bgr))
        except Exception as exc:  # onnxruntime's bad_alloc under RLIMIT_AS is the memory limit
            if "bad_alloc" in str(exc):
                raise MemoryError(str(exc)) from exc
            raise
        if output.txts is None or output.boxes is None:
            return []
        return [_line(text, float(score), box) for text, score, box in zip(output.txts, output.scores, output.boxes)
                if text.strip() and score >= self.min_score]

    def engine(self) -> Any:
        """The RapidOCR engine, built on first use."""
        if self._engine is None:
            self._engine = build_engine(num_threads=self.num_threads, min_score=self.min_score)
        return self._engine


def build_engine(*, num_threads: int, min_score: float) -> Any:
    try:
        from rapidocr import LangCls, LangDet, LangRec, ModelType, OCRVersion, RapidOCR
    except ModuleNotFoundError as exc:  # not installed (an ImportError under RLIMIT_AS is not this)
        raise ParseError("ocr_unavailable", "images need OCR: pip install 'kb-ray[ocr]' (rapidocr, onnxruntime)") from exc
    route_rapidocr_logging()
    langs = {"det": LangDet, "cls": LangCls, "rec": LangRec}
    params: dict[str, Any] = {"Global.log_level": "warning", "Global.text_score": min_score,
                              "EngineConfig.onnxruntime.intra_op_num_threads": num_threads,
                              "EngineConfig.onnxruntime.inter_op_num_threads": 1}
    for task, (ocr_version, model_type, lang) in OCR_MODELS.items():
        section = task.capitalize()
        params |= {f"{section}.ocr_version": OCRVersion(ocr_version), f"{section}.model_type": ModelType(model_type),
                   f"{section}.lang_type": langs[task](lang)}
    return RapidOCR(params=params)


def route_rapidocr_logging() -> None:
    """RapidOCR logs INFO lines to a console handler of its own; send them through stdlib
    logging instead, at WARNING and above."""
    rapid = logging.getLogger("RapidOCR")
    for handler in list(rapid.handlers):
        rapid.removeHandler(handler)
    rapid.propagate = True
    rapid.setLevel(logging.WARNING)


def _rapidocr_version() -> str:
    try:
        return importlib.metadata.version("rapidocr")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _line(text: str, score: float, box: Any) -> OcrLine:
    points = np.asarray(box, dtype=float).reshape(-1, 2)
    x0, top = points.min(axis=0)
    x1, bottom = points.max(axis=0)
    return OcrLine(text=" ".join(text.split()), score=score, x0=float(x0), top=float(top), x1=float(x1),
                   bottom=float(bottom))


# -- lines → paragraphs in reading order -------------------------------------------------


def page_blocks(lines: list[OcrLine], *, info: PageInfo, paragraph_gap: float) -> list[Block]:
    """One ``paragraph`` block per group of lines, in reading order."""
    return [_block(group, info) for group in reading_order(paragraphs(lines, gap=paragraph_gap))]


def paragraphs(lines: list[OcrLine], *, gap: float) -> list[list[OcrLine]]:
    """Lines grouped into paragraphs: each line joins the latest paragraph it continues."""
    groups: list[list[OcrLine]] = []
    for line in sorted(lines, key=lambda l: (l.top, l.x0)):
        target = next((group for group in reversed(groups) if continues(group[-1], line, gap=gap)), None)
        if target is None:
            groups.append([line])
        else:
            target.append(line)
    return groups


def continues(above: OcrLine, line: OcrLine, *, gap: float) -> bool:
    """``line`` is the next line of ``above``'s paragraph: below it within ``gap`` line
    heights, of a similar height, and overlapping it horizontally."""
    height = max(above.height, line.height, 1.0)
    similar = min(above.height, line.height) >= 0.7 * height
    below = -0.3 * height <= line.top - above.bottom <= gap * height
    overlap = min(above.x1, line.x1) - max(above.x0, line.x0)
    return similar and below and overlap > 0.2 * min(above.x1 - above.x0, line.x1 - line.x0)


def reading_order(groups: list[list[OcrLine]]) -> list[list[OcrLine]]:
    """Top to bottom; paragraphs whose first lines share a row, left to right."""
    ordered: list[list[OcrLine]] = []
    row: list[list[OcrLine]] = []
    for group in sorted(groups, key=lambda g: g[0].top):
        if row and group[0].top > row[0][0].top + 0.5 * row[0][0].height:
            ordered += sorted(row, key=lambda g: g[0].x0)
            row = []
        row.append(group)
    return ordered + sorted(row, key=lambda g: g[0].x0)


def _block(group: list[OcrLine], info: PageInfo) -> Block:
    text, spans = _joined([line.text for line in group])
    box = (min(l.x0 for l in group), min(l.top for l in group), max(l.x1 for l in group), max(l.bottom for l in group))
    attrs: dict[str, Any] = {"ocr_score": round(min(l.score for l in group), 4)}
    if len(group) > 1:
        attrs["lines"] = [[a, b, info.page_no, *(round(v, 4) for v in _bbox(l, info))]
                          for (a, b), l in zip(spans, group)]
    return Block(kind="paragraph", text=text, page=info.page_no, bbox=_bbox(box, info), attrs=attrs)


def _joined(lines: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The lines joined by spaces (a word hyphenated at a line end joined back) and each
    line's (start, end) in the result."""
    text, spans = "", []
    for line in lines:
        if text.endswith("-") and line[:1].islower():
            text = text[:-1]
            spans[-1] = (spans[-1][0], spans[-1][1] - 1)
        elif text:
            text += " "
        spans.append((len(text), len(text) + len(line)))
        text += line
    return text, spans


def _bbox(box: OcrLine | tuple[float, float, float, float], info: PageInfo) -> tuple[float, float, float, float]:
    x0, top, x1, bottom = (box.x0, box.top, box.x1, box.bottom) if isinstance(box, OcrLine) else box
    return normalize_bbox(x0, top, x1, bottom, width=info.width, height=info.height)
