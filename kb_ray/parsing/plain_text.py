"""Plain text: paragraphs split at blank lines, bullet lines as list items."""

from __future__ import annotations

import codecs
import re

from kb_ray.errors import ParseError
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import Block, ParseResult

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n+")
_BULLET = re.compile(r"^\s*([-*•–]|\d{1,3}[.)])\s+(.*)$")
_BINARY_SHARE = 0.01  # more NUL/control bytes than this: not text


class PlainTextParser(Parser):
    name = "plain_text"
    version = "1"
    mimes = frozenset({"text/plain"})

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        text = decode_text(data)
        blocks: list[Block] = []
        for paragraph in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n").replace("\r", "\n")):
            blocks.extend(_paragraph_blocks(paragraph))
        return ParseResult(status="ok", parser=self.name, mime=mime, blocks=blocks)


def decode_text(data: bytes) -> str:
    """Strict UTF-8 (BOM allowed) or UTF-16 with a BOM; anything else is refused."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16")
    controls = sum(1 for byte in data[:65536] if byte < 9 or 13 < byte < 32)
    if controls > _BINARY_SHARE * min(len(data), 65536):
        raise ParseError("unsupported_type", "the file looks binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError("invalid_encoding", f"not valid UTF-8 at byte {exc.start}; re-save the file as UTF-8") from exc


def _paragraph_blocks(paragraph: str) -> list[Block]:
    """Bullet lines become list items (indented lines continue them); other lines join
    into paragraphs."""
    blocks: list[Block] = []
    prose: list[str] = []
    for line in (line for line in paragraph.split("\n") if line.strip()):
        match = _BULLET.match(line)
        continues_item = blocks and blocks[-1].kind == "list_item" and not prose and line[:1].isspace()
        if match:
            _flush(prose, blocks)
            indent = (len(line) - len(line.lstrip())) // 2
            blocks.append(Block(kind="list_item", text=match.group(2).strip(), level=min(indent, 6),
                                attrs={"marker": match.group(1)}))
        elif continues_item:
            last = blocks.pop()
            blocks.append(Block(kind="list_item", text=f"{last.text} {line.strip()}", level=last.level, attrs=last.attrs))
        else:
            prose.append(line.strip())
    _flush(prose, blocks)
    return blocks


def _flush(prose: list[str], blocks: list[Block]) -> None:
    if prose:
        blocks.append(Block(kind="paragraph", text=" ".join(prose)))
        prose.clear()
