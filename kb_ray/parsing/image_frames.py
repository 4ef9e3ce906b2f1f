"""Image bytes → bounded RGB frames (Pillow), the pages an OCR parser reads.

Pillow's ``Image.open`` reads only the header, so every frame's size is checked against
``limits.max_image_pixels`` before a pixel is decoded: a small file claiming 40,000 x 40,000
pixels fails in milliseconds as ``decompression_bomb``. Pillow's own bomb check
(``Image.MAX_IMAGE_PIXELS``, about 89 M pixels) is turned from a warning into the same
reason, so it also bounds a configured ``max_image_pixels`` above it. A TIFF is one page
per frame (1-based); the other formats are their first frame (an animated WebP or PNG is
not a document of pages).
"""

from __future__ import annotations

import io
import warnings
from typing import Any, Callable, Iterator, TypeVar

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from kb_ray.errors import ParseError
from kb_ray.parsing.base import ParseLimits

_MULTI_PAGE_FORMATS = frozenset({"TIFF"})
_TRANSPARENT_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})
_WIDE_MODES = frozenset({"I", "I;16", "I;16B", "I;16L", "I;16N", "F"})  # more than 8 bits per sample
_BAD_IMAGE = (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError)
T = TypeVar("T")


def image_frames(data: bytes, *, limits: ParseLimits) -> Iterator[tuple[int, Image.Image]]:
    """``(page_no, RGB frame)`` for every page of the image, each checked before it is decoded."""
    image = _guarded(Image.open, io.BytesIO(data))  # reads the header only
    with image:
        count = _guarded(_page_count, image, limits=limits)
        for index in range(count):
            yield index + 1, _guarded(_decoded_frame, image, index, count=count, limits=limits)


def _guarded(step: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``step(...)`` with Pillow's failures as reasons (its bomb warning is an error here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            return step(*args, **kwargs)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ParseError("decompression_bomb", f"Pillow refused the image: {exc}") from exc
        except _BAD_IMAGE as exc:
            raise ParseError("corrupt", f"the image cannot be decoded: {type(exc).__name__}: {exc}"[:500]) from exc


def _page_count(image: Image.Image, *, limits: ParseLimits) -> int:
    count = getattr(image, "n_frames", 1) if image.format in _MULTI_PAGE_FORMATS else 1
    if count > limits.max_pages:
        raise ParseError("too_many_pages", f"{count} frames > limit {limits.max_pages} (parse.max_pages)")
    return count


def _decoded_frame(image: Image.Image, index: int, *, count: int, limits: ParseLimits) -> Image.Image:
    if index:
        image.seek(index)
    width, height = image.size
    if width * height > limits.max_image_pixels:
        where = f"frame {index + 1} of {count} is" if count > 1 else "the image is"
        raise ParseError("decompression_bomb",
                         f"{where} {width} x {height} = {width * height:,} pixels > limit "
                         f"{limits.max_image_pixels:,} (parse.max_image_pixels); nothing was decoded")
    if width == 0 or height == 0:
        raise ParseError("empty", f"the image is {width} x {height} pixels")
    image.load()
    return to_rgb(ImageOps.exif_transpose(image))  # upright, as a viewer shows it


def to_rgb(frame: Image.Image) -> Image.Image:
    """8-bit RGB: transparency composed over white (dark text on a clear background stays
    readable), wide greyscale scaled to its own range."""
    if frame.mode in _TRANSPARENT_MODES or (frame.mode == "P" and "transparency" in frame.info):
        rgba = frame.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba).convert("RGB")
    if frame.mode in _WIDE_MODES:
        samples = np.asarray(frame, dtype=np.float32)
        low, high = float(samples.min()), float(samples.max())
        scaled = (samples - low) * (255.0 / (high - low)) if high > low else np.zeros_like(samples)
        return Image.fromarray(scaled.astype(np.uint8), mode="L").convert("RGB")
    return frame.convert("RGB")
