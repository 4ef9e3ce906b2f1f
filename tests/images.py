"""Images the tests draw or craft: a labelled picture, a PNG whose header lies about its size."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def png_claiming(width: int, height: int) -> bytes:
    """A valid-looking 1-bit greyscale PNG header claiming ``width`` x ``height``, with a tiny IDAT."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(1000))) + chunk(b"IEND", b"")


def label_png(path: Path, text: str) -> Path:
    """One line of large black text on white, as a photographed label."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (900, 200), "white")
    ImageDraw.Draw(image).text((40, 60), text, fill="black", font=ImageFont.load_default(size=44))
    image.save(path)
    return path
