"""tests/cost_plugin.py (#41): the wrappers count what they wrap, per test file, and call through."""

from __future__ import annotations

from types import SimpleNamespace

from tests.cost_plugin import CostCounter, _subprocess_kind


def test_a_wrapped_call_is_counted_for_the_running_test_and_still_runs():
    counter, calls = CostCounter(), []
    owner = SimpleNamespace(start=lambda port: calls.append(port) or "started")
    counter.wrap(owner, "start", "serve_start")
    counter.current = "tests/serving/test_x.py::test_one"
    assert owner.start(8000) == "started" and owner.start(port=8001) == "started"
    counter.files["tests/serving/test_x.py"]["seconds"] += 2.5
    assert calls == [8000, 8001] and counter.files["tests/serving/test_x.py"]["serve_start"] == 2
    table = counter.table()
    assert "| tests/serving/test_x.py | 2.5 | 0 |  | 2 |" in table and "| **total** | 2.5 |" in table


def test_only_kb_ray_ingests_in_a_subprocess_count():
    assert _subprocess_kind(None, [".venv/bin/python", "-m", "kb_ray.cli", "ingest", "--source", "x"])
    assert _subprocess_kind(None, [".venv/bin/kb-ray", "watch", "--source", "x"])
    assert _subprocess_kind(None, ["git", "ingest"]) is None and _subprocess_kind(None, "ls -l") is None
