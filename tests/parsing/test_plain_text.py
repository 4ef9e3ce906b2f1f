import codecs

from kb_ray.parsing.plain_text import PlainTextParser


def parse(data: bytes):
    return PlainTextParser().parse(data, mime="text/plain", filename="x.txt")


def test_paragraphs_and_list_items():
    result = parse("First para\ncontinues here.\n\nIntro line:\n- one\n  more of one\n- two\n    - nested\n".encode())
    assert result.status == "ok"
    assert [(b.kind, b.text, b.level) for b in result.blocks] == [
        ("paragraph", "First para continues here.", 0),
        ("paragraph", "Intro line:", 0),
        ("list_item", "one more of one", 0),
        ("list_item", "two", 0),
        ("list_item", "nested", 2),
    ]


def test_utf8_bom_and_utf16_are_decoded():
    assert parse(codecs.BOM_UTF8 + "Xin chào".encode()).blocks[0].text == "Xin chào"
    assert parse("Xin chào".encode("utf-16")).blocks[0].text == "Xin chào"


def test_invalid_utf8_fails_with_a_reason():
    result = parse(b"caf\xe9 au lait")
    assert result.status == "failed" and result.error.startswith("invalid_encoding")


def test_binary_and_empty_input_fail():
    assert parse(bytes(range(256)) * 4).error.startswith("unsupported_type")
    assert parse(b"").error.startswith("empty")
    assert parse(b"  \n\n \n").error.startswith("empty")
