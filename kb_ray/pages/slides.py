"""``SlidePdfConverter``: a PPTX's bytes → the same presentation as PDF, one page per slide,
with LibreOffice headless (``soffice --convert-to pdf``), so the viewer renders a slide with
the PDF path (kb_ray/search/page_images.py, docs/viewer.md).

Docling reports a slide's size in points (EMU / 12700) and each shape's box normalized to the
slide with its origin top-left; LibreOffice's PDF page is the slide's size in points with the
shapes at the same place, so a citation's box lands on the shape. Hidden slides are exported
too (``ExportHiddenSlides``): Docling numbers them, and page ``n`` must stay slide ``n``.

Each conversion runs in its own temporary directory (input, output, a private LibreOffice
profile and ``HOME``), removed afterwards, with a timeout that kills the whole process group.
Failures are :class:`SlideConversionError` with a ``reason``: ``no_renderer`` (soffice is not
installed: ``make office-deps``), ``convert_failed`` or ``convert_timeout``.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from kb_ray import ids
from kb_ray.errors import KbRayError

CONVERTER_VERSION = "1"
PDF_FILTER = 'pdf:impress_pdf_Export:{"ExportHiddenSlides":{"type":"boolean","value":"true"}}'
CONVERT_LOCK = threading.Lock()  # one soffice at a time per process: each takes hundreds of MB
_INSTALL_HINT = "install LibreOffice Impress (make office-deps: apt-get install libreoffice-impress-nogui)"


class SlideConversionError(KbRayError):
    """A presentation that could not be converted; ``reason`` is one of ``no_renderer``,
    ``convert_failed``, ``convert_timeout``."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason, self.detail = reason, detail
        super().__init__(f"slide conversion failed ({reason}): {detail}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.reason, self.detail)


def soffice_binary() -> str:
    """The ``soffice`` on PATH; :class:`SlideConversionError` ``no_renderer`` when there is none."""
    binary = shutil.which("soffice") or shutil.which("libreoffice")
    if binary is None:
        raise SlideConversionError("no_renderer", f"LibreOffice (soffice) is not installed: {_INSTALL_HINT}")
    return binary


def converter_fingerprint() -> str:
    """What a converted PDF depends on besides the PPTX's bytes: this code and LibreOffice's build."""
    return _fingerprint(soffice_binary())


@functools.cache
def _fingerprint(binary: str) -> str:
    with tempfile.TemporaryDirectory(prefix="kb-ray-soffice-") as temp:
        output = _run([binary, _profile_arg(Path(temp)), "--version"], work=Path(temp), timeout_s=60)
    return ids.fingerprint(kind="converter", name="SlidePdfConverter", version=CONVERTER_VERSION,
                           config={"soffice": output.strip(), "filter": PDF_FILTER})


class SlidePdfConverter:
    """Converts PPTX bytes to PDF bytes; stateless apart from the timeout."""

    def __init__(self, *, timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s

    def convert(self, data: bytes) -> bytes:
        binary = soffice_binary()
        with tempfile.TemporaryDirectory(prefix="kb-ray-soffice-") as temp:
            work = Path(temp)
            source = work / "slides.pptx"
            source.write_bytes(data)
            command = [binary, "--headless", "--norestore", "--nolockcheck", _profile_arg(work),
                       "--convert-to", PDF_FILTER, "--outdir", str(work / "out"), str(source)]
            output = _run(command, work=work, timeout_s=self.timeout_s)
            converted = work / "out" / "slides.pdf"
            if not converted.is_file():
                raise SlideConversionError("convert_failed", f"soffice wrote no PDF: {output.strip()[-300:] or 'no output'}")
            return converted.read_bytes()


def _profile_arg(work: Path) -> str:
    """A private LibreOffice profile inside the temporary directory (never the user's)."""
    return f"-env:UserInstallation={(work / 'profile').as_uri()}"


def _run(command: list[str], *, work: Path, timeout_s: float) -> str:
    """Run soffice in ``work`` with ``HOME`` there too; its output, or :class:`SlideConversionError`.
    soffice is a script that starts ``soffice.bin``: a timeout kills the whole process group."""
    env = {**os.environ, "HOME": str(work), "TMPDIR": str(work)}
    process = subprocess.Popen(command, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise SlideConversionError("convert_timeout", f"soffice took more than {timeout_s:g} s "
                                   "(serve.page_image_convert_timeout_s)") from None
    text = output.decode("utf-8", "replace")
    if process.returncode != 0:
        raise SlideConversionError("convert_failed", f"soffice exited with {process.returncode}: {text.strip()[-300:]}")
    return text
