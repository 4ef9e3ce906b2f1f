"""ProcessIsolatedParser with real spawned processes: results, hard timeout, crashes, recycling."""

from __future__ import annotations

import functools
import os
import signal
import time

import pytest

from kb_ray.parsing.base import ParseLimits
from kb_ray.parsing.isolation import ProcessIsolatedParser
from tests.parsing.isolation_parsers import ScriptedParser, UnpreparableParser

GRACE = 0.5
LIMITS = ParseLimits(max_seconds=1.0)


@pytest.fixture
def isolated():
    parser = ProcessIsolatedParser(factory=functools.partial(ScriptedParser, flavour="tea"),
                                   recycle_after_pages=5, grace_seconds=GRACE, start_seconds=60)
    yield parser
    parser.close()


def parse(parser: ProcessIsolatedParser, command: str):
    return parser.parse(command.encode(), mime="text/plain", filename="cmd.txt", limits=LIMITS)


def test_parses_in_a_child_process_with_the_inner_parsers_identity(isolated):
    result = parse(isolated, "pages 1")
    assert result.status == "ok" and result.parser == "scripted"
    pid = isolated.child_pid
    assert pid is not None and pid != os.getpid()
    assert result.blocks[0].text == f"tea from pid {pid}"
    assert isolated.fingerprint == ScriptedParser(flavour="tea").fingerprint
    assert isolated.fingerprint != ScriptedParser(flavour="coffee").fingerprint
    assert parse(isolated, "pages 1").blocks[0].text == f"tea from pid {pid}"  # the same child again


def test_a_hung_parse_is_killed_and_the_next_document_gets_a_fresh_child(isolated):
    parse(isolated, "pages 1")
    first_pid = isolated.child_pid
    started = time.perf_counter()
    result = parse(isolated, "sleep 60")
    elapsed = time.perf_counter() - started
    assert result.status == "failed" and result.error.startswith("timeout")
    assert elapsed < LIMITS.max_seconds + GRACE + 2.0  # terminate takes effect at once on a sleeping child
    assert isolated.child_pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(first_pid, 0)  # really gone, not orphaned
    after = parse(isolated, "pages 1")
    assert after.status == "ok" and isolated.child_pid not in (None, first_pid)


@pytest.mark.parametrize(("command", "code"), [("exit 7", 7), ("segfault", -signal.SIGSEGV)])
def test_a_dying_child_fails_the_document_as_crashed_with_its_exit_code(isolated, command, code):
    result = parse(isolated, command)
    assert result.status == "failed" and result.error.startswith("crashed")
    assert f"exit code {code}" in result.error
    assert parse(isolated, "pages 1").status == "ok"


@pytest.mark.parametrize(("command", "reason"), [("abort", "crashed"), ("abort 64", "memory_limit")])
def test_an_abort_is_memory_limit_only_inside_a_pdfium_memory_budget(isolated, command, reason):
    result = parse(isolated, command)
    assert (result.status, result.reason) == ("failed", reason), result.error
    assert ("exit code -6" in result.detail) == (reason == "crashed")
    assert parse(isolated, "pages 1").status == "ok"


def test_the_child_is_recycled_after_the_page_budget(isolated):
    parse(isolated, "pages 3")
    first_pid = isolated.child_pid
    parse(isolated, "pages 2")  # 5 pages: the budget is spent, the child stops
    assert isolated.child_pid is None
    parse(isolated, "pages 1")
    assert isolated.child_pid not in (None, first_pid)


def test_a_parser_that_cannot_prepare_reports_its_reason_and_leaves_no_child():
    parser = ProcessIsolatedParser(factory=UnpreparableParser, start_seconds=60)
    result = parser.parse(b"pages 1", mime="text/plain", filename="x.txt", limits=LIMITS)
    assert result.status == "failed" and result.error.startswith("model_unavailable: no weights")
    assert parser.child_pid is None


def test_limits_checked_before_a_child_starts_and_close_stops_it(isolated):
    assert isolated.parse(b"", mime="text/plain", limits=LIMITS).error.startswith("empty")
    assert isolated.child_pid is None
    parse(isolated, "pages 1")
    pid = isolated.child_pid
    isolated.close()
    assert isolated.child_pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
