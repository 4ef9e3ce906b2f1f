"""Chunk budgets counted in the embedder's own word pieces (chunking.tokenizer: wordpiece).

The point of the wordpiece budget: it counts what the embedder reads (heading path + chunk
text) in the embedder's own pieces, so no chunk runs past 512 of them, and every part of a
chunk is embedded: a chunk past the model's input is also embedded as passages
(``index.passage_chars``) that each fit it. Checked against the model's tokenizer through
transformers (a different code path from the ``tokenizers`` counter under test) on the
golden documents and on identifier-heavy text where regex words undercount badly.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb_ray.chunking.tokens import RegexCounter, WordPieceCounter, count_tokens
from kb_ray.config import ChunkingSettings
from kb_ray.embedding.fingerprint import DEFAULT_TEXT_TEMPLATE, HEADING_SEPARATOR
from kb_ray.embedding.model_files import default_model_path
from kb_ray.index.passages import passage_spans, passage_texts
from kb_ray.parsing.blocks import Block
from kb_ray.processing import WORDPIECE_BUDGET, DocumentProcessor, build_chunker
from kb_ray.structure.builder import StructureBuilder
from tests.golden.conftest import SOURCES_DIR

transformers = pytest.importorskip("transformers", reason="the reference tokenizer needs transformers (embed extra)")
MODEL = default_model_path()
REFERENCE = transformers.AutoTokenizer.from_pretrained(str(MODEL))
LIMIT = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json)
PASSAGE_CHARS = 512  # index.passage_chars

IDENTIFIER_TEXT = " ".join(
    f"Set `pg_stat_statements.max_{i}` via ALTER SYSTEM; see /usr/share/doc/postgresql-{i}/README.Debian.gz "
    f"and libfoo{i}.so.{i}.0 (CONFIG_X86_{i}=y)." for i in range(60))


def reference_length(text: str) -> int:
    return len(REFERENCE(text, add_special_tokens=True, truncation=False)["input_ids"])


def embed_text(chunk) -> str:
    heading = HEADING_SEPARATOR.join(chunk.chunk.heading_path)
    return DEFAULT_TEXT_TEMPLATE.format(heading_path=heading, text=chunk.text).strip()


def test_the_default_budget_is_512_word_pieces():
    chunker = build_chunker(ChunkingSettings())
    assert chunker.max_tokens == WORDPIECE_BUDGET == 512
    assert chunker.config()["tokenizer"].startswith("tokenizer-") and chunker.config()["headings_in_budget"]
    assert build_chunker(ChunkingSettings(tokenizer="regex")).config() == {"max_tokens": 200,
                                                                           "tokenizer": "regex-words-v1"}


def test_counts_agree_with_the_models_tokenizer():
    counter = WordPieceCounter(MODEL)
    for text in ("Hello, world!", IDENTIFIER_TEXT, "naïve café — 温度 42 kW"):
        assert counter.count(text) + 2 == reference_length(text)


def test_identifier_text_runs_far_past_its_regex_word_count():
    """Why the regex budget truncated technical chunks: word pieces outnumber regex words."""
    assert WordPieceCounter(MODEL).count(IDENTIFIER_TEXT) > 1.3 * count_tokens(IDENTIFIER_TEXT)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=8, max_value=120), st.integers(min_value=0, max_value=len(IDENTIFIER_TEXT) - 1))
def test_cuts_keep_every_piece_within_the_budget_and_at_word_ends(budget, start):
    counter, text = WordPieceCounter(MODEL), IDENTIFIER_TEXT[start:]
    cuts = counter.cuts(text, budget)
    bounds = [0, *cuts, len(text)]
    assert cuts == sorted(set(cuts)) and all(0 < c < len(text) for c in cuts)
    for a, b in zip(bounds, bounds[1:]):
        assert counter.count(text[a:b]) <= budget
    for cut in cuts:  # never inside a run of letters/digits (a word), since every word here fits the budget
        assert not (text[cut - 1].isalnum() and text[cut].isalnum())


def test_a_word_longer_than_the_budget_is_cut_between_its_pieces():
    word = "qzxvkjw" * 14  # 98 characters: WordPiece still splits it (longer words become one [UNK])
    counter = WordPieceCounter(MODEL)
    assert counter.count(word) > 10
    cuts = counter.cuts(word, 4)
    assert cuts and all(counter.count(piece) <= 4 for piece in _pieces(word, cuts))


def test_regex_cuts_are_every_budget_tokens():
    assert RegexCounter().cuts("a b c d e", 2) == [3, 7]
    assert RegexCounter().cuts("a b", 2) == []


def embedded_whole(chunk) -> bool:
    """The chunk's text is read by the embedder: in one input, or through passages that each
    fit the input and together cover every non-space character of the chunk."""
    if reference_length(embed_text(chunk)) <= LIMIT:
        return True
    spans = passage_spans(chunk.text, max_chars=PASSAGE_CHARS)
    texts = passage_texts(chunk.text, chunk.chunk.heading_path, max_chars=PASSAGE_CHARS)
    covered = set().union(*(range(a, b) for a, b in spans)) if spans else set()
    uncovered = [i for i, ch in enumerate(chunk.text) if not ch.isspace() and i not in covered]
    return bool(texts) and not uncovered and max(reference_length(t) for t in texts) <= LIMIT


def test_identifier_heavy_sections_stay_within_the_budget_and_are_embedded_whole():
    blocks = [Block("title", "PostgreSQL packaging notes for Debian maintainers"),
              Block("heading", "Configuration of pg_stat_statements and shared libraries", level=1),
              Block("paragraph", IDENTIFIER_TEXT)]
    structured = StructureBuilder().build(blocks, version_id="ver_w")
    chunks = build_chunker(ChunkingSettings()).chunk(structured.canonical_text, structured.elements,
                                                     document_id="doc_w")
    assert len(chunks) > 1
    assert max(reference_length(embed_text(c)) for c in chunks) <= WORDPIECE_BUDGET + 2
    assert all(embedded_whole(c) for c in chunks)
    regex_chunks = build_chunker(ChunkingSettings(tokenizer="regex")).chunk(
        structured.canonical_text, structured.elements, document_id="doc_w")
    assert max(reference_length(embed_text(c)) for c in regex_chunks) > LIMIT  # past the input, unnoticed


def test_every_golden_chunk_is_embedded_whole():
    processor = DocumentProcessor()
    chunks = []
    for path in sorted(p for p in SOURCES_DIR.iterdir() if p.is_file()):
        version = processor.process(path.read_bytes(), collection="golden", key=path.name, filename=path.name)
        chunks.extend(version.chunks)
    lengths = [reference_length(embed_text(c)) for c in chunks]
    assert len(chunks) > 50 and max(lengths) <= WORDPIECE_BUDGET + 2
    assert any(length > LIMIT for length in lengths)  # the budget is past the input: passages read the rest
    assert [c.chunk.chunk_id for c in chunks if not embedded_whole(c)] == []


def _pieces(text, cuts):
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]
