"""Every parser bounded (parse.isolate, the default): the router runs its parsers in one
child process per worker, with a hard wall-clock limit, an address-space limit and a
markup-depth check, and a document that hits one fails with that reason while the next
document parses normally. Real spawned processes, real parsers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from kb_ray.config import ParseSettings
from kb_ray.parsing.base import ParseLimits
from kb_ray.parsing.router import PARSER_FACTORIES, ParserRouter
from kb_ray.processing import DocumentProcessor, build_router
from tests.conftest import GOLDEN_SOURCES, REPO_ROOT

LIMITS = ParseLimits(max_seconds=2.0, max_memory_bytes=1536 << 20)
DEEP_HTML = b"<html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000


@pytest.fixture
def scripted_router(monkeypatch):
    monkeypatch.setitem(PARSER_FACTORIES, "scripted", "tests.parsing.isolation_parsers:ScriptedParser")
    router = ParserRouter(routes={"text/plain": ["scripted"]}, limits=LIMITS, isolate=True)
    yield router
    router.close()


def parse(router: ParserRouter, command: str):
    return router.parse(command.encode(), filename="cmd.txt", mime="text/plain")


def test_parsers_run_in_one_child_with_their_own_identity(scripted_router):
    result = parse(scripted_router, "pages 1")
    assert result.status == "ok" and result.parser == "scripted"
    pid = scripted_router._isolated.child_pid
    assert pid not in (None, os.getpid()) and result.blocks[0].text == f"plain from pid {pid}"
    plain = ParserRouter(routes={"text/plain": ["scripted"]}, limits=LIMITS)
    assert plain.fingerprint == scripted_router.fingerprint  # isolation does not change the output


@pytest.mark.parametrize(("command", "reason", "seconds"), [
    ("sleep 600", "timeout", LIMITS.max_seconds + 5.0 + 3.0),  # killed after max_seconds + the 5 s grace
    ("alloc 4096", "memory_limit", 10.0),  # 4 GiB under a 1.5 GiB RLIMIT_AS
    ("recurse", "nesting_too_deep", 10.0),
    ("exit 9", "crashed", 10.0),
])
def test_a_document_over_a_bound_fails_with_its_reason_and_the_next_one_parses(scripted_router, command, reason,
                                                                              seconds):
    started = time.perf_counter()
    result = parse(scripted_router, command)
    assert (result.status, result.reason, result.parser) == ("failed", reason, "scripted"), result.error
    assert time.perf_counter() - started < seconds
    assert parse(scripted_router, "pages 1").status == "ok"


def test_deep_html_fails_fast_as_nesting_too_deep_and_real_html_still_parses():
    processor = DocumentProcessor(parse=ParseSettings(max_seconds=120))
    try:
        started = time.perf_counter()
        version = processor.process(DEEP_HTML, collection="c", key="deep.html", filename="deep.html")
        assert version.status == "failed" and version.reason == "nesting_too_deep", version.error
        assert time.perf_counter() - started < 30  # docling held a worker 400 s on this file before
        faq = (GOLDEN_SOURCES / "faq.html").read_bytes()
        assert processor.process(faq, collection="c", key="faq.html", filename="faq.html").status != "failed"
    finally:
        processor.router.close()


def test_isolation_is_the_default_and_can_be_turned_off():
    assert build_router(ParseSettings()).isolate and build_router(ParseSettings()).limits.max_memory_bytes == 4 << 30
    off = build_router(ParseSettings(isolate=False, max_memory_mb=None))
    assert not off.isolate and off.limits.max_memory_bytes is None
    result = off.parse(b"hello there", filename="a.txt")
    assert result.status == "ok" and off._isolated is None  # parsed in this process


def test_a_zip_bomb_docx_fails_before_anything_is_inflated_and_a_real_docx_parses():
    from tests.ingest.corpus import zip_bomb_docx

    bomb = zip_bomb_docx()
    assert len(bomb) < 200_000
    router = build_router(ParseSettings(isolate=False))
    started = time.perf_counter()
    result = router.parse(bomb, filename="bomb.docx")
    assert (result.status, result.reason) == ("failed", "decompression_bomb"), result.error
    assert "inflates" in result.detail and time.perf_counter() - started < 1.0
    assert router.parse((GOLDEN_SOURCES / "policy.docx").read_bytes(), filename="policy.docx").status == "ok"


def test_a_docx_with_members_named_outside_the_archive_parses_and_names_each_in_a_note_and_a_warning(caplog):
    from tests.ingest.corpus import ZIP_SLIP_MEMBERS, zip_slip_docx

    router = build_router(ParseSettings(isolate=False))
    with caplog.at_level("WARNING", logger="kb_ray.parsing.docling_formats"):
        result = router.parse(zip_slip_docx(), filename="slip.docx")
    assert result.status == "ok" and result.blocks, result.error  # the document itself is read
    assert [note.split(":")[0] for note in result.notes] == ["unsafe_archive_member"] * len(ZIP_SLIP_MEMBERS)
    for name, note, record in zip(ZIP_SLIP_MEMBERS, result.notes, caplog.records, strict=True):
        assert repr(name) in note and record.getMessage() == f"slip.docx: {note}"
    plain = router.parse((GOLDEN_SOURCES / "policy.docx").read_bytes(), filename="policy.docx")
    assert plain.status == "ok" and plain.notes == []


def test_a_flate_bomb_pdf_fails_as_memory_limit_in_time_with_its_parser_process_under_1_gib(tmp_path):
    """2 MB of PDF whose content stream inflates to 2 GiB: the parser process grew to 2.4 GB
    resident and pdfium aborted it (``crashed``, exit code -6) before its page got a budget
    (parse.pdfium_memory_mb). Measured in a process of its own, whose only children are the
    parser processes; a real PDF parses in the fresh child after it."""
    from tests.ingest.corpus import SECTIONS, flate_bomb_pdf, make_pdf

    bomb = tmp_path / "flate-bomb.pdf"
    bomb.write_bytes(flate_bomb_pdf(2048))
    assert bomb.stat().st_size < 3 << 20
    max_seconds = 60
    probe = subprocess.run([sys.executable, "-m", "tests.parsing.bomb_probe", str(max_seconds), str(bomb),
                            str(make_pdf(tmp_path / "pump.pdf", SECTIONS))],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=180, check=True)
    outcome = json.loads(probe.stdout.splitlines()[-1])
    exploded, after = outcome["results"]
    assert (exploded["status"], exploded["reason"]) == ("failed", "memory_limit"), exploded
    assert "parse.pdfium_memory_mb" in exploded["detail"] and exploded["seconds"] < max_seconds
    assert outcome["child_peak_rss_mib"] <= 1024, outcome
    assert after["status"] == "ok", after


def test_model_parsers_children_get_no_address_space_cap():
    import functools

    from kb_ray.parsing.isolation import ProcessIsolatedParser
    from tests.parsing.isolation_parsers import ScriptedParser

    uncapped = ProcessIsolatedParser(factory=functools.partial(ScriptedParser), limit_memory=False, grace_seconds=1)
    try:
        generous = ParseLimits(max_seconds=120.0, max_memory_bytes=LIMITS.max_memory_bytes)  # zero-filling 2 GiB is slow on a busy box
        result = uncapped.parse(b"alloc 2048", mime="text/plain", filename="a.txt", limits=generous)
        assert result.status == "ok", result.error  # 2 GiB past the 1.5 GiB cap that the other children get
    finally:
        uncapped.close()
