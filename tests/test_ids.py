import unicodedata

from kb_ray import ids


def test_ids_are_typed_and_128_bit():
    value = ids.document_id(collection="c", key="a/b.pdf")
    assert value.startswith("doc_") and len(value) == 4 + 32
    assert ids.chunk_id(document_id=value, chunker_fp="fp", content_sha="x", occurrence=0).startswith("ch_")


def test_ids_are_deterministic_and_nfc_normalized():
    composed = unicodedata.normalize("NFC", "Tiếng Việt")
    decomposed = unicodedata.normalize("NFD", "Tiếng Việt")
    assert composed != decomposed
    assert ids.make_id("doc", composed) == ids.make_id("doc", decomposed)
    assert ids.sha256_text(composed) == ids.sha256_text(decomposed)


def test_parts_cannot_collide_by_concatenation():
    assert ids.make_id("x", "ab", "c") != ids.make_id("x", "a", "bc")


def test_occurrence_disambiguates_duplicate_content():
    first = ids.chunk_id(document_id="d", chunker_fp="f", content_sha="s", occurrence=0)
    second = ids.chunk_id(document_id="d", chunker_fp="f", content_sha="s", occurrence=1)
    assert first != second


def test_fingerprint_changes_with_config_and_version():
    base = ids.fingerprint(kind="chunker", name="structural", version="1", config={"max_tokens": 200})
    assert base == ids.fingerprint(kind="chunker", name="structural", version="1", config={"max_tokens": 200})
    assert base != ids.fingerprint(kind="chunker", name="structural", version="1", config={"max_tokens": 100})
    assert base != ids.fingerprint(kind="chunker", name="structural", version="2", config={"max_tokens": 200})
