"""Where the suite's time goes, by expensive fixture (#41): a pytest plugin, on only where asked.

``KB_RAY_TEST_COSTS=PATH pytest -p tests.cost_plugin ...`` (``make test-costs``; PATH an existing
directory: one file per session in it) counts, per test file, the seconds
its tests took (setup + call + teardown) and how often they started the things that cost: a
local Ray instance, a Ray Serve application, an in-process ingest (of golden/sources or of
another corpus; ``ingest_inline``: how many of those ran in the driver, kb_ray/ingest/inline.py,
not on Ray Data), a ``kb-ray``/``jobs`` ingest in a subprocess, a text-embedding model's weights
loaded (not a ``TextEmbedder`` built over weights the process holds), a Postgres server and a
Chromium. It writes the table as Markdown to PATH (and JSON beside it). Nothing is
patched unless the variable is set; the wrappers call the real functions and only count.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import GOLDEN_SOURCES

COUNTS = ("ray_start", "serve_start", "ingest_golden", "ingest_other", "ingest_inline", "ingest_subprocess",
          "model_load", "postgres_start", "chromium_start")


class CostCounter:
    """Per test file: seconds and the counts of :data:`COUNTS`, attributed to the running test."""

    def __init__(self) -> None:
        self.current = "(collection)"
        self.files: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def count(self, what: str) -> None:
        self.files[self.current.split("::")[0]][what] += 1

    def wrap(self, owner, name: str, what, *, when=None) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def counted(*args, **kwargs):
            kind = what(*args, **kwargs) if callable(what) else what
            if kind and (when is None or when(*args, **kwargs)):
                self.count(kind)
            return original(*args, **kwargs)

        setattr(owner, name, counted)

    def install(self) -> None:
        import ray

        import kb_ray.embedding.text as text
        import kb_ray.ingest.inline as inline
        import kb_ray.ingest.run as ingest_run
        import kb_ray.serving.app as app

        self.wrap(ray, "init", "ray_start", when=lambda *a, **k: not ray.is_initialized())
        self.wrap(app, "start_service", "serve_start")
        self.wrap(ingest_run, "run_ingest", _ingest_kind)
        self.wrap(inline, "run_inline", "ingest_inline")  # looked up by run.py at call time
        self.wrap(text, "_load_encoder", "model_load")
        self.wrap(subprocess.Popen, "__init__", _subprocess_kind)
        self._wrap_optional()

    def _wrap_optional(self) -> None:
        try:
            from tests.publish.postgres_server import LocalPostgres

            self.wrap(LocalPostgres, "start", "postgres_start")
        except ImportError:
            pass
        try:
            from selenium import webdriver

            self.wrap(webdriver.Chrome, "__init__", "chromium_start")
        except ImportError:
            pass

    def table(self) -> str:
        rows = sorted(self.files.items(), key=lambda item: -item[1].get("seconds", 0))
        head = ["file", "seconds", "tests", *COUNTS]
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        totals: dict[str, float] = defaultdict(float)
        for name, values in rows:
            for key in ("seconds", "tests", *COUNTS):
                totals[key] += values.get(key, 0)
            lines.append(_row(name, values))
        lines.append(_row("**total**", totals))
        return "\n".join(lines) + "\n"


def _row(name: str, values: dict[str, float]) -> str:
    cells = [f"{values.get('seconds', 0):.1f}", f"{values.get('tests', 0):.0f}",
             *(f"{values.get(key, 0):.0f}" if values.get(key) else "" for key in COUNTS)]
    return f"| {name} | " + " | ".join(cells) + " |"


def _ingest_kind(config, *args, **kwargs) -> str:
    sources = [str(source) for source in getattr(config.ingest, "sources", []) or []]
    return "ingest_golden" if sources and all(s.rstrip("/") == str(GOLDEN_SOURCES) for s in sources) else "ingest_other"


def _subprocess_kind(self, args, *rest, **kwargs) -> str | None:
    words = [str(word) for word in args] if isinstance(args, (list, tuple)) else str(args).split()
    runs_kb_ray = any(w.endswith(("kb-ray", "kb_ray.cli")) or "jobs/" in w for w in words)
    return "ingest_subprocess" if runs_kb_ray and ("ingest" in words or "watch" in words) else None


_COUNTER: CostCounter | None = None


def pytest_configure(config) -> None:
    global _COUNTER
    if os.environ.get("KB_RAY_TEST_COSTS") and _COUNTER is None:
        _COUNTER = CostCounter()
        _COUNTER.install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _COUNTER is not None:
        _COUNTER.current = item.nodeid
        _COUNTER.files[item.nodeid.split("::")[0]]["tests"] += 1
    yield


def pytest_runtest_logreport(report) -> None:
    if _COUNTER is not None:
        _COUNTER.files[report.nodeid.split("::")[0]]["seconds"] += report.duration


def pytest_sessionfinish(session, exitstatus) -> None:
    if _COUNTER is None:
        return
    path = Path(os.environ["KB_RAY_TEST_COSTS"])
    if path.is_dir():  # one file per pytest session (CI's two runs): named by the time it ended
        path = path / time.strftime("test_costs_%Y%m%dT%H%M%S.md", time.gmtime())
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    path.write_text(f"<!-- written by tests/cost_plugin.py at {stamp} -->\n" + _COUNTER.table())
    path.with_suffix(".json").write_text(json.dumps({name: dict(values) for name, values in _COUNTER.files.items()},
                                                    indent=1, sort_keys=True))
