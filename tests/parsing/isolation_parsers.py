"""Parsers for the process-isolation tests; importable by the spawned child process.

:class:`ScriptedParser` reads its document as a command: ``pages N`` returns N pages,
``sleep S`` sleeps S seconds first, ``exit C`` ends the process with code C,
``segfault`` dereferences a null pointer, ``alloc M`` allocates M MiB, ``recurse``
recurses without end and ``abort [M]`` aborts the process (SIGABRT), inside a budget of
M MiB (kb_ray/parsing/native_memory.py, as pdfium does when an allocation fails) when given.
"""

from __future__ import annotations

import ctypes
import os
import time

from kb_ray.errors import ParseError
from kb_ray.parsing import native_memory
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import Block, PageInfo, ParseResult


class ScriptedParser(Parser):
    name = "scripted"
    version = "1"
    mimes = frozenset({"text/plain"})

    def __init__(self, *, flavour: str = "plain") -> None:
        self.flavour = flavour

    def config(self) -> dict:
        return {"flavour": self.flavour}

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        command, _, argument = data.decode().partition(" ")
        pages = 1
        if command == "sleep":
            time.sleep(float(argument))
        elif command == "exit":
            os._exit(int(argument))
        elif command == "segfault":
            ctypes.string_at(0)
        elif command == "pages":
            pages = int(argument)
        elif command == "alloc":
            held = bytearray(int(argument) << 20)
            held[-1] = 1
        elif command == "recurse":
            _recurse(0)
        elif command == "abort":
            with native_memory.bounded(int(argument) << 20 if argument else None):
                os.abort()
        text = f"{self.flavour} from pid {os.getpid()}"
        return ParseResult(status="ok", parser=self.name, mime=mime, blocks=[Block(kind="paragraph", text=text)],
                           pages=[PageInfo(page_no=n + 1, width=10.0, height=10.0) for n in range(pages)])


class UnpreparableParser(ScriptedParser):
    """Its models cannot load: ``prepare()`` fails in the child before any document."""

    def prepare(self, *, limits: ParseLimits) -> None:
        raise ParseError("model_unavailable", "no weights in this test")


def _recurse(n: int) -> int:
    return _recurse(n + 1) + 1
