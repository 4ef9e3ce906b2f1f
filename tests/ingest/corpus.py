"""Small corpora the ingest tests write into tmp dirs."""

from __future__ import annotations

import io
import os
import shutil
import zipfile
import zlib
from pathlib import Path

from tests.conftest import GOLDEN_SOURCES
from tests.images import png_claiming

SECTIONS = [
    ("Intake", "The intake screen must be cleaned every week. Debris reduces flow by up to 30 percent."),
    ("Seals", "Replace the shaft seal AF-SK-118 every 4000 hours. Use only the supplied lubricant."),
    ("Motor", "The motor is rated at 2.2 kW. It trips when the winding exceeds 130 degrees Celsius."),
    ("Storage", "Drain the pump before storage below freezing. Store it upright in a dry room."),
]


def make_pdf(path: Path, sections: list[tuple[str, str]], *, title: str = "Pump care", author: str = "kb") -> Path:
    """A born-digital PDF with one page per section, each a heading and a few paragraphs."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4, invariant=1)
    pdf.setTitle(title)
    pdf.setAuthor(author)
    for heading, body in sections:
        pdf.setFont("Helvetica-Bold", 16)
        pdf.drawString(72, 760, heading)
        pdf.setFont("Helvetica", 10)
        y = 730
        for sentence in body.split(". "):
            pdf.drawString(72, y, sentence.strip().rstrip(".") + ".")
            y -= 14
        pdf.showPage()
    pdf.save()
    return path


def small_corpus(root: Path) -> Path:
    """Two golden text files, one golden markdown file and a generated 4-page PDF."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("notes.txt", "vietnamese.txt", "guide.md"):
        shutil.copy(GOLDEN_SOURCES / name, root / name)
    make_pdf(root / "pump.pdf", SECTIONS)
    return root


def hostile_files(root: Path) -> dict[str, str]:
    """Bad inputs and the failure reason each must be recorded with."""
    root.mkdir(parents=True, exist_ok=True)
    manual = (GOLDEN_SOURCES / "manual.pdf").read_bytes()
    (root / "truncated.pdf").write_bytes(manual[: len(manual) // 3])
    (root / "empty.txt").write_bytes(b"")
    (root / "image.pdf").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (root / "big.pdf").write_bytes((GOLDEN_SOURCES / "long_report.pdf").read_bytes())
    (root / "data.bin").write_bytes(bytes(range(256)))
    (root / "deep.html").write_bytes(b"<html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000)
    (root / "bomb.docx").write_bytes(zip_bomb_docx())
    outside = root.parent.parent / "outside-the-sources"  # a sibling of the corpus, never a source
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text("A file the symlink reaches outside the source directory.\n")
    (root / "escape.txt").symlink_to(outside / "secret.txt")
    (root / "huge.txt").write_bytes(b"padding line\n" * (HOSTILE_MAX_BYTES // 13 + 1))
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("A name that is not UTF-8.\n")
    encrypted_pdf(root / "locked.pdf")
    scanned_pdf(root / "scan.pdf")
    (root / "bomb.png").write_bytes(png_claiming(20_000, 20_000))  # 400 M pixels in a 1 kB file
    return {"truncated.pdf": "corrupt", "empty.txt": "empty", "image.pdf": "corrupt",
            "latin1.txt": "invalid_encoding", "big.pdf": "too_many_pages", "data.bin": "unsupported_type",
            "deep.html": "nesting_too_deep", "bomb.docx": "decompression_bomb", "escape.txt": "outside_source",
            "huge.txt": "too_large", "caf\ufffd.txt": "invalid_name", "locked.pdf": "encrypted",
            "scan.pdf": "no_text_layer", "bomb.png": "decompression_bomb"}


HOSTILE_MAX_BYTES = 2 << 20  # the parse.max_bytes the hostile batch runs with (huge.txt is past it)


def encrypted_pdf(path: Path) -> None:
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), encrypt="secret")
    pdf.drawString(72, 720, "A password-protected page.")
    pdf.save()


def scanned_pdf(path: Path) -> None:
    """A page that is one picture and no text layer, as a scanner makes it."""
    from PIL import Image, ImageDraw
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    picture = Image.new("RGB", (600, 200), "white")
    ImageDraw.Draw(picture).text((20, 80), "scanned words without a text layer", fill="black")
    pdf = canvas.Canvas(str(path))
    pdf.drawImage(ImageReader(picture), 72, 500, width=450, height=150)
    pdf.save()


def zip_bomb_docx(inflated_mib: int = 64) -> bytes:
    """A DOCX-shaped ZIP (content types, a document part) with one member of zeros that
    inflates ~1000x: a few tens of kB on disk."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        archive.writestr("word/document.xml", "<w:document/>")
        archive.writestr("word/media/image1.bin", bytes(inflated_mib << 20))
    return out.getvalue()


ZIP_SLIP_MEMBERS = ("../../outside.sh", "/etc/cron.d/evil", "word\\..\\..\\evil.dll")


def zip_slip_docx() -> bytes:
    """The golden policy.docx plus members named outside the archive (a "zip slip"): a
    relative climb, an absolute path and a Windows-style climb."""
    out = io.BytesIO()
    with zipfile.ZipFile(GOLDEN_SOURCES / "policy.docx") as real, \
            zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member in real.infolist():
            archive.writestr(member, real.read(member))
        for name in ZIP_SLIP_MEMBERS:
            archive.writestr(name, "echo escaped\n")
    return out.getvalue()


def flate_bomb_pdf(inflated_mib: int = 2048) -> bytes:
    """A one-page PDF whose content stream (FlateDecode) inflates to ``inflated_mib`` MiB of
    spaces after one line of text: ~1000x, 2 MB on disk for 2 GiB. Built in milliseconds: each
    MiB of spaces is the same full-flushed deflate block, and the Adler-32 of the inflated
    stream is computed in closed form."""
    text = b"BT /F1 12 Tf 72 720 Td (flate bomb) Tj ET\n"
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate; the zlib header and checksum are ours
    head = deflate.compress(text) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(b" " * (1 << 20)) + deflate.flush(zlib.Z_FULL_FLUSH)  # no history: repeatable
    tail = deflate.flush()
    stream = b"\x78\xda" + head + block * inflated_mib + tail + _adler32_of_spaces(text, inflated_mib << 20)
    return _one_page_pdf(stream)


def _adler32_of_spaces(prefix: bytes, n: int) -> bytes:
    """Adler-32 of ``prefix`` followed by ``n`` spaces, big-endian (RFC 1950)."""
    modulus, checksum = 65521, zlib.adler32(prefix)
    a, b = checksum & 0xFFFF, checksum >> 16
    a, b = (a + 32 * n) % modulus, (b + n * a + 32 * n * (n + 1) // 2) % modulus
    return ((b << 16) | a).to_bytes(4, "big")


def _one_page_pdf(content: bytes) -> bytes:
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> "
        b"/Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%b\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%b\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
