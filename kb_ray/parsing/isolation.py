"""Run a parser in a child process: a hard timeout, crash containment, memory given back.

A model pipeline cannot be stopped from inside once a model call hangs, a native library can
segfault, and some (Docling) keep growing in memory over many documents. The
:class:`ProcessIsolatedParser` builds the real parser in ONE long-lived child process
(``spawn``: forking a process that holds CUDA or threads is unsafe) and sends it one document
at a time over a pipe:

  * a parse that takes longer than ``limits.max_seconds`` plus a grace period kills the child
    (terminate, then kill) and fails with reason ``"timeout"``; the next document starts a
    fresh child;
  * a child that dies (segfault, OOM kill, ``os._exit``) fails the document with reason
    ``"crashed"`` and its exit code, except one that aborted inside a pdfium budget
    (kb_ray/parsing/native_memory.py): pdfium aborts when an allocation fails, so that is
    ``"memory_limit"``;
  * after ``recycle_after_pages`` pages the child is stopped and the next document starts a
    fresh one.

The parser is described by a picklable factory (a class, or ``functools.partial`` of one)
that the child calls; it is also called once here, where constructors are cheap by
contract, to take the parser's name and fingerprint: isolation does not change the output.
A factory's parser may define ``prepare(*, limits)`` (load models); the child calls it with
the first document's limits before it reports ready, so model loading does not count
against a document's time.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import logging
import multiprocessing
import multiprocessing.util  # noqa: F401  # its atexit hook (kills daemonic children) now runs after ours
import signal
import threading
import time
import weakref
from multiprocessing.connection import Connection
from typing import Any, Callable

from kb_ray.errors import ParseError
from kb_ray.parsing import native_memory
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import ParseResult

logger = logging.getLogger(__name__)

ParserFactory = Callable[[], Parser]
_READY = "ready"


class ProcessIsolatedParser(Parser):
    """``factory()``'s parser, run in a child process with a hard per-document timeout."""

    def __init__(self, *, factory: ParserFactory, recycle_after_pages: int = 2000,
                 grace_seconds: float = 5.0, start_seconds: float = 600.0, limit_memory: bool = True) -> None:
        """``limit_memory``: cap the child's address space at ``limits.max_memory_bytes`` and
        a page's pdfium work at ``limits.pdfium_memory_bytes`` (off for model parsers: CUDA and
        model runtimes reserve far more address space than they use)."""
        local = factory()
        self.limit_memory = limit_memory
        self.target: str | None = None  # the ParserSet parser of the parse in progress
        self.name, self.version, self.mimes = local.name, local.version, local.mimes
        self._config = local.config()
        self.factory = factory
        self.recycle_after_pages = recycle_after_pages
        self.grace_seconds = grace_seconds
        self.start_seconds = start_seconds  # child start-up and model loading
        self._slot = _Slot()
        self._lock = threading.Lock()  # one document at a time through the pipe
        weakref.finalize(self, self._slot.stop)  # when this parser is garbage collected
        atexit.register(self._slot.stop)  # registered after multiprocessing's hook, so it runs first

    def config(self) -> dict[str, Any]:
        return self._config

    @property
    def child_pid(self) -> int | None:
        """The running child's process id, ``None`` before the first parse or after a stop."""
        child = self._slot.child
        return child.pid if child is not None else None

    def parse(self, data: bytes, *, mime: str, filename: str = "", limits: ParseLimits | None = None,
              target: str | None = None) -> ParseResult:
        """Start the child first, so that start-up and model loading (``start_seconds``) do not
        count against the document's ``max_seconds``; then parse as every parser does.
        ``target``: the parser of a :class:`ParserSet` child to run."""
        with self._lock:
            self.target = target
            limits = limits or ParseLimits()
            if self._slot.child is None and data and len(data) <= limits.max_bytes:
                try:
                    self._start(limits)
                except ParseError as exc:
                    return ParseResult.failed(parser=self.name, mime=mime, reason=exc.reason, detail=exc.detail)
            return super().parse(data, mime=mime, filename=filename, limits=limits)

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        child = self._slot.child or self._start(limits)
        try:
            result = child.request((data, mime, filename, self._child_limits(limits), self.target),
                                   seconds=limits.max_seconds + self.grace_seconds)
        except ParseError:
            self._slot.stop(kill=True)
            raise
        child.pages += len(result.pages)
        if child.pages >= self.recycle_after_pages:
            logger.info("recycling the %s process after %d pages", self.name, child.pages)
            self._slot.stop()
        return result

    def close(self) -> None:
        """Stop the child process (a later parse starts a new one)."""
        with self._lock:
            self._slot.stop()

    def _child_limits(self, limits: ParseLimits) -> ParseLimits:
        if self.limit_memory:
            return limits
        return dataclasses.replace(limits, max_memory_bytes=None, pdfium_memory_bytes=None)

    def _start(self, limits: ParseLimits) -> _ChildProcess:
        child = self._slot.child = _ChildProcess(self.factory, name=self.name, limits=self._child_limits(limits))
        try:
            child.wait_ready(seconds=self.start_seconds)
        except ParseError:
            self._slot.stop(kill=True)
            raise
        logger.info("started the %s process, pid %s", self.name, child.pid)
        return child


class _ChildProcess:
    """One spawned child serving one parser over a pipe, seen from the parent."""

    def __init__(self, factory: ParserFactory, *, name: str, limits: ParseLimits) -> None:
        context = multiprocessing.get_context("spawn")
        self.name = name
        self.pages = 0
        self.conn, theirs = context.Pipe(duplex=True)
        self.pdfium_budget = context.RawValue("q", 0)  # bytes while the child reads a page under a budget
        self.process = context.Process(target=serve, args=(theirs, factory, limits, self.pdfium_budget), daemon=True,
                                       name=f"kb-ray-{name}")
        self.process.start()
        theirs.close()  # so that a dead child reads as end-of-file here

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process.is_alive() else None

    def wait_ready(self, *, seconds: float) -> None:
        message = self._receive(seconds=seconds, doing="start")
        if message != _READY:  # prepare() failed: a ParseError's (reason, detail)
            raise ParseError(*message)

    def request(self, payload: tuple, *, seconds: float) -> ParseResult:
        try:
            self.conn.send(payload)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self._raise_dead(doing="receiving the document")
        return self._receive(seconds=seconds, doing="parse")

    def _receive(self, *, seconds: float, doing: str) -> Any:
        if not self.conn.poll(seconds):
            raise ParseError("timeout", f"{self.name} did not {doing} within {seconds:.1f}s; its process was killed")
        try:
            return self.conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            self._raise_dead(doing=doing)

    def _raise_dead(self, *, doing: str) -> None:
        self.process.join(timeout=5)
        code, budget = self.process.exitcode, self.pdfium_budget.value
        if code == -signal.SIGABRT and budget:
            raise ParseError("memory_limit", f"pdfium needed more than {budget >> 20} MiB for one page "
                                             "(parse.pdfium_memory_mb) and aborted its process")
        raise ParseError("crashed", f"the {self.name} process died during {doing} (exit code {code})")

    def stop(self, *, kill: bool = False) -> None:
        """Ask the child to return (or not, with ``kill``), then terminate and kill if needed."""
        if not kill and self.process.is_alive():
            try:
                self.conn.send(None)
                self.process.join(timeout=10)
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass
        for end in (self.process.terminate, self.process.kill):
            if self.process.is_alive():
                end()
                self.process.join(timeout=3)
        self.conn.close()


class _Slot:
    """Holds the current child; stopping is idempotent (called by close, GC and atexit)."""

    def __init__(self) -> None:
        self.child: _ChildProcess | None = None

    def stop(self, *, kill: bool = False) -> None:
        child, self.child = self.child, None
        if child is not None:
            child.stop(kill=kill)


# ---- the child process -------------------------------------------------------------------


def serve(conn: Connection, factory: ParserFactory, limits: ParseLimits, pdfium_budget: Any) -> None:
    """The child's loop: build the parser, prepare it for ``limits``, then parse requests
    until ``None``. ``pdfium_budget``: the flag :mod:`native_memory` holds a page's budget in."""
    _limit_memory(limits.max_memory_bytes)
    native_memory.register(pdfium_budget)
    parser = factory()
    prepare = getattr(parser, "prepare", None)
    try:
        if callable(prepare):
            started = time.perf_counter()
            prepare(limits=limits)
            logger.info("%s prepared in %.1fs", parser.name, time.perf_counter() - started)
    except ParseError as exc:
        conn.send((exc.reason, exc.detail))
        return
    except Exception as exc:  # models that cannot load are not the document's fault
        conn.send(("model_unavailable", f"{type(exc).__name__}: {exc}"[:500]))
        return
    conn.send(_READY)
    while (request := _next_request(conn)) is not None:
        data, mime, filename, limits, target = request
        runner = parser.get(target) if target is not None else parser
        result = runner.parse(data, mime=mime, filename=filename, limits=limits)
        try:
            conn.send(result)
        except Exception as exc:  # an unpicklable result: report it instead of dying
            conn.send(ParseResult.failed(parser=parser.name, mime=mime, reason="corrupt",
                                         detail=f"result could not be sent back: {exc}"[:500]))


def _limit_memory(max_bytes: int | None) -> None:
    """Cap this process's address space: an allocation past it raises ``MemoryError`` in the
    parser (reason ``memory_limit``) instead of the kernel killing the worker."""
    if max_bytes is None:
        return
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = max_bytes if hard == resource.RLIM_INFINITY else min(max_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _next_request(conn: Connection) -> tuple | None:
    try:
        return conn.recv()
    except EOFError:  # the parent went away
        return None


# ---- every parser of a router in one child -------------------------------------------------


ParserSpec = tuple[str, dict[str, Any]]  # ("module:Class", constructor keyword arguments)


class ParserSet(Parser):
    """The parsers of a router by name, each built on first use: what one isolated child
    serves (``get``); it does not parse by itself."""

    name = "parser_set"

    def __init__(self, specs: dict[str, ParserSpec]) -> None:
        self.specs = specs
        self._parsers: dict[str, Parser] = {}

    def get(self, name: str) -> Parser:
        if name not in self._parsers:
            from kb_ray.parsing.router import load_factory

            spec, options = self.specs[name]
            self._parsers[name] = load_factory(spec)(**options)
        return self._parsers[name]

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        raise ParseError("unsupported_type", "a ParserSet parses through get(name)")


class IsolatedParsers:
    """One child process serving a :class:`ParserSet`; :meth:`parser` gives each name a
    :class:`Parser` whose parses run there, under the hard timeout and ``limits.max_memory_bytes``."""

    def __init__(self, specs: dict[str, ParserSpec], *, recycle_after_pages: int = 2000,
                 grace_seconds: float = 5.0) -> None:
        self.specs = specs
        self.process = ProcessIsolatedParser(factory=functools.partial(ParserSet, specs),
                                             recycle_after_pages=recycle_after_pages, grace_seconds=grace_seconds,
                                             start_seconds=120.0)

    def parser(self, name: str, local: Parser) -> Parser:
        """``local`` (built here, cheaply) gives the name and fingerprint; parses go to the child."""
        return _InChild(name=name, local=local, pool=self)

    @property
    def child_pid(self) -> int | None:
        return self.process.child_pid

    def close(self) -> None:
        self.process.close()


class _InChild(Parser):
    """A parser that runs in the shared child; its name and fingerprint are the local one's."""

    def __init__(self, *, name: str, local: Parser, pool: IsolatedParsers) -> None:
        self.name, self.version, self.mimes = local.name, local.version, local.mimes
        self._config = local.config()
        self._target = name
        self._pool = pool

    def config(self) -> dict[str, Any]:
        return self._config

    def parse(self, data: bytes, *, mime: str, filename: str = "", limits: ParseLimits | None = None) -> ParseResult:
        result = self._pool.process.parse(data, mime=mime, filename=filename, limits=limits, target=self._target)
        result.parser = self.name  # a timeout or crash is reported by the process, not the parser
        return result

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        raise NotImplementedError  # parse() goes to the child
