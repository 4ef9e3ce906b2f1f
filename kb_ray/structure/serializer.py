"""The one deterministic serializer from blocks to canonical text.

Rules (each block becomes one "piece"; pieces are joined by a blank line, consecutive
list items by a single newline):

* title / heading of level L: ``"#" * L + " " + text`` (a title is level 1)
* list item at depth d: ``"  " * d + "- " + text`` (ordered markers are kept: ``"1. "``)
* table: GitHub-flavoured Markdown (first header row, ``---`` separator, ``|`` escaped)
* code: fenced with ``````` on lines of their own
* everything else: the text itself

Only ``text`` (what sits between markup) is an element's span, so
``canonical[span] == element.text`` always holds.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from kb_ray.parsing.blocks import Block

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANK_LINES = re.compile(r"\n{2,}")


@dataclass(frozen=True)
class Piece:
    """One serialized block: ``prefix + text + suffix``; ``text`` is the element's text."""

    prefix: str
    text: str
    suffix: str = ""


def clean_text(text: str, *, keep_newlines: bool = False) -> str:
    """NFC, no control characters, collapsed spaces; newlines folded unless kept."""
    text = unicodedata.normalize("NFC", _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    if keep_newlines:
        lines = [_SPACES.sub(" ", line).rstrip() for line in text.split("\n")]
        return _BLANK_LINES.sub("\n", "\n".join(lines)).strip("\n")
    return _SPACES.sub(" ", text.replace("\n", " ")).strip()


def clean_code(text: str) -> str:
    """Like :func:`clean_text` but indentation inside lines is kept."""
    text = unicodedata.normalize("NFC", _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def gfm_table(rows: list[list[str]], *, header_rows: int = 1) -> str:
    """Render rows as a GitHub-flavoured Markdown table; ragged rows are padded."""
    width = max((len(row) for row in rows), default=0)
    if width == 0:
        return ""
    cells = [[_gfm_cell(cell) for cell in row] + [""] * (width - len(row)) for row in rows]
    header, body = (cells[0], cells[1:]) if header_rows > 0 else ([""] * width, cells)
    lines = [_gfm_row(header), _gfm_row(["---"] * width)] + [_gfm_row(row) for row in body]
    return "\n".join(lines)


def _gfm_cell(cell: object) -> str:
    return clean_text("" if cell is None else str(cell)).replace("|", "\\|")


def _gfm_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def serialize_block(block: Block) -> Piece:
    """The canonical rendering of one body block."""
    kind = block.kind
    if kind in ("title", "heading"):
        level = 1 if kind == "title" else max(1, min(block.level, 6))
        return Piece("#" * level + " ", clean_text(block.text))
    if kind == "list_item":
        marker = str(block.attrs.get("marker") or "-")
        marker = marker if re.fullmatch(r"\d{1,3}[.)]|[a-z][.)]", marker) else "-"
        return Piece("  " * max(0, block.level) + marker + " ", clean_text(block.text))
    if kind == "table" and block.attrs.get("rows"):
        return Piece("", gfm_table(block.attrs["rows"], header_rows=int(block.attrs.get("header_rows", 1))))
    if kind == "code":
        return Piece("```\n", clean_code(block.text), "\n```")
    return Piece("", clean_text(block.text, keep_newlines=kind == "table"))


def separator(previous: Block | None, current: Block) -> str:
    """The text between two consecutive body pieces."""
    if previous is None:
        return ""
    if previous.kind == "list_item" and current.kind == "list_item":
        return "\n"
    return "\n\n"
