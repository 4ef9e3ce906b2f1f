from kb_ray.chunking.structural import StructuralChunker
from kb_ray.chunking.tokens import count_tokens
from kb_ray.parsing.blocks import Block
from kb_ray.structure.builder import StructureBuilder


def chunk(blocks, max_tokens=60):
    structured = StructureBuilder().build(blocks, version_id="ver_s")
    return structured, StructuralChunker(max_tokens=max_tokens).chunk(
        structured.canonical_text, structured.elements, document_id="doc_s")


def sentence(i: int) -> str:
    return f"Sentence {i} says the valve must be checked weekly."


def test_token_counter_counts_words_and_punctuation():
    assert count_tokens("Hello, world! 42 kW.") == 7


def test_heading_starts_its_section_chunk_and_paths_are_recorded():
    _, chunks = chunk([Block("title", "Manual"), Block("heading", "Install", level=1), Block("paragraph", "Mount it."),
                       Block("heading", "Care", level=1), Block("paragraph", "Oil it.")])
    assert [c.text for c in chunks] == ["# Manual\n\n# Install\n\nMount it.", "# Care\n\nOil it."]
    assert [c.chunk.heading_path for c in chunks] == [("Manual", "Install"), ("Manual", "Care")]


def test_small_peers_merge_within_the_budget():
    _, chunks = chunk([Block("heading", "A", level=1)] + [Block("paragraph", sentence(i)) for i in range(3)])
    assert len(chunks) == 1 and chunks[0].chunk.token_count <= 60


def test_oversize_paragraph_splits_at_sentence_boundaries():
    _, chunks = chunk([Block("paragraph", " ".join(sentence(i) for i in range(20)))], max_tokens=40)
    assert len(chunks) > 3
    assert all(c.chunk.token_count <= 40 for c in chunks)
    assert all(c.text.endswith(".") for c in chunks)


def test_a_giant_sentence_is_split_by_tokens():
    _, chunks = chunk([Block("paragraph", " ".join(["word"] * 130))], max_tokens=50)
    assert [c.chunk.token_count for c in chunks] == [50, 50, 30]


def test_big_table_splits_by_rows_and_repeats_the_header():
    rows = [["Part", "Qty"]] + [[f"P-{i}", str(i)] for i in range(40)]
    structured, chunks = chunk([Block("table", "", attrs={"rows": rows}), Block("caption", "Table 2: stock")])
    tables = [c for c in chunks if c.chunk.kind == "table"]
    assert len(tables) > 1
    for placed in tables:
        assert len(placed.spans) == 2 and placed.text.startswith("| Part | Qty |\n| --- | --- |\n")
    assert tables[-1].text.endswith("Table 2: stock")
    body_rows = [line for c in tables for line in c.text.split("\n")[2:] if line.startswith("| P-")]
    assert len(body_rows) == 40


def test_table_or_figure_and_caption_form_one_evidence_unit():
    _, chunks = chunk([Block("paragraph", "Before."), Block("figure", "[figure]", page=1, bbox=(0, 0, 1, 0.5)),
                       Block("caption", "Figure 1: the pump"), Block("paragraph", "After.")])
    figure = next(c for c in chunks if c.chunk.kind == "figure")
    assert figure.text == "[figure]\n\nFigure 1: the pump" and figure.pages == (1,)


def test_unchanged_text_keeps_its_chunk_id_when_other_sections_change():
    base = [Block("heading", "A", level=1), Block("paragraph", sentence(1)),
            Block("heading", "B", level=1), Block("paragraph", sentence(2))]
    changed = base[:3] + [Block("paragraph", sentence(3))]
    _, first = chunk(base)
    _, second = chunk(changed)
    assert first[0].chunk_id == second[0].chunk_id
    assert first[1].chunk_id != second[1].chunk_id


def test_duplicate_paragraphs_get_distinct_ids():
    _, chunks = chunk([Block("heading", "A", level=1), Block("paragraph", "Same."), Block("table", "x | y"),
                       Block("heading", "A", level=1), Block("paragraph", "Same.")])
    ids = [c.chunk_id for c in chunks]
    assert len(ids) == len(set(ids))
