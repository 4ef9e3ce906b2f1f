"""Golden documents processed once per session with default settings.

Documents are processed under collection ``golden`` with the file name as key, so every
id (and so every snapshot) is independent of where the repository is checked out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from kb_ray.model import DocumentVersion
from kb_ray.processing import DocumentProcessor

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
SOURCES_DIR = GOLDEN_DIR / "sources"
SNAPSHOTS_DIR = GOLDEN_DIR / "snapshots"
GOLDEN_FILES = sorted(path.name for path in SOURCES_DIR.iterdir() if path.is_file())
PDF_FILES = [name for name in GOLDEN_FILES if name.endswith(".pdf")]


@pytest.fixture(scope="session")
def golden_processor() -> DocumentProcessor:
    return DocumentProcessor()


@pytest.fixture(scope="session")
def golden_version(golden_processor: DocumentProcessor) -> Callable[[str], DocumentVersion]:
    """``golden_version("manual.pdf")``: the processed version, cached for the session."""
    cache: dict[str, DocumentVersion] = {}

    def process(name: str) -> DocumentVersion:
        if name not in cache:
            data = (SOURCES_DIR / name).read_bytes()
            cache[name] = golden_processor.process(data, collection="golden", key=name)
        return cache[name]

    return process
