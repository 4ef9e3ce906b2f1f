import pytest

from kb_ray.chunking.recursive import RecursiveChunker
from kb_ray.parsing.blocks import Block
from kb_ray.structure.builder import StructureBuilder


def test_windows_respect_size_and_overlap():
    text = " ".join(f"Sentence {i} is here." for i in range(300))
    structured = StructureBuilder().build([Block("heading", "H", level=1), Block("paragraph", text)], version_id="v")
    chunks = RecursiveChunker(chunk_chars=400, overlap=80).chunk(
        structured.canonical_text, structured.elements, document_id="d")
    assert len(chunks) > 5
    assert all(len(c.text) <= 400 for c in chunks)
    for previous, current in zip(chunks, chunks[1:]):
        assert current.spans[0][0] < previous.spans[0][1]  # they overlap
        assert current.spans[0][0] > previous.spans[0][0]  # and make progress
    assert chunks[1].chunk.heading_path == ("H",)


def test_overlap_must_be_smaller_than_the_window():
    with pytest.raises(ValueError):
        RecursiveChunker(chunk_chars=100, overlap=100)
