"""``kb-ray parse``: JSON output, the text summary, failures and config overrides."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kb_ray.cli import main

SOURCES_DIR = Path(__file__).resolve().parents[2] / "golden" / "sources"
MANUAL = str(SOURCES_DIR / "manual.pdf")


def parse_json(capsys, *args: str) -> dict:
    code = main(["parse", *args, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


@pytest.fixture(scope="module")
def manual_json() -> dict:
    # capsys is function-scoped; capture stdout by hand once for the module.
    from contextlib import redirect_stdout

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = main(["parse", MANUAL, "--json"])
    assert code == 0, buffer.getvalue()
    return json.loads(buffer.getvalue())


def test_json_has_the_document_version(manual_json):
    assert manual_json["status"] == "staged" and manual_json["error"] is None
    assert isinstance(manual_json["canonical_text"], str) and manual_json["canonical_text"]
    assert manual_json["elements"] and manual_json["chunks"]


def test_json_elements_have_spans_text_and_regions(manual_json):
    canonical = manual_json["canonical_text"]
    for element in manual_json["elements"]:
        assert {"id", "kind", "level", "span", "text", "regions"} <= set(element)
        assert isinstance(element["level"], int)
        if element["span"] is None:
            assert element["layer"] == "furniture"
        else:
            start, end = element["span"]
            assert canonical[start:end] == element["text"]
        assert element["regions"], f"PDF element without region: {element['text'][:40]!r}"
        for region in element["regions"]:
            assert isinstance(region["page"], int) and region["page"] >= 1
            assert len(region["bbox"]) == 4 and all(isinstance(v, float) for v in region["bbox"])
            assert all(0.0 <= v <= 1.0 for v in region["bbox"])


def test_json_chunks_round_trip(manual_json):
    canonical = manual_json["canonical_text"]
    for chunk in manual_json["chunks"]:
        assert {"id", "text", "spans", "pages", "heading_path", "token_count"} <= set(chunk)
        assert chunk["text"] == "\n".join(canonical[start:end] for start, end in chunk["spans"])
        assert chunk["pages"] and isinstance(chunk["token_count"], int) and chunk["token_count"] > 0
        assert isinstance(chunk["heading_path"], list)
    assert len({chunk["id"] for chunk in manual_json["chunks"]}) == len(manual_json["chunks"])


def test_summary_prints_element_counts(capsys, manual_json):
    assert main(["parse", MANUAL]) == 0
    out = capsys.readouterr().out
    kinds: dict[str, int] = {}
    for element in manual_json["elements"]:
        kinds[element["kind"]] = kinds.get(element["kind"], 0) + 1
    assert out.startswith("manual.pdf: application/pdf via pdf_text, 3 pages")
    assert f"{len(manual_json['elements'])} elements, {len(manual_json['chunks'])} chunks" in out
    for kind, count in kinds.items():
        assert f"{kind}={count}" in out


def test_failed_file_exits_1_with_the_reason(capsys, tmp_path):
    from PIL import Image

    scan = tmp_path / "scan.pdf"
    Image.new("RGB", (16, 16), "white").save(scan, format="PNG")
    assert main(["parse", str(scan)]) == 1
    out = capsys.readouterr().out
    assert "scan.pdf: FAILED (corrupt:" in out and "image/png" in out


def test_failed_file_as_json_exits_1(capsys, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert main(["parse", str(empty), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "failed" and data["error"].startswith("empty:")
    assert data["chunks"] == [] and data["canonical_text"] == ""


def test_missing_file_is_an_error(capsys, tmp_path):
    assert main(["parse", str(tmp_path / "nope.pdf")]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_set_override_changes_chunking(capsys, manual_json):
    small = parse_json(capsys, MANUAL, "--set", "chunking.max_tokens=50")
    assert len(small["chunks"]) > len(manual_json["chunks"])
    assert max(chunk["token_count"] for chunk in small["chunks"]) < max(
        chunk["token_count"] for chunk in manual_json["chunks"])
    assert small["canonical_text"] == manual_json["canonical_text"]
