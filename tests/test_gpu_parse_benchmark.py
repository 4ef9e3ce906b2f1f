"""benchmarks/gpu_parse.py --tiny end to end: the sweep runs and the report holds every measured row.

A measurement script, not a timed test: it checks that each Docling cell and each caption
batch size was measured and written (Markdown and JSON), never how fast. Excluded from the
default run (``benchmark`` marker); about a minute on a 2-core CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.benchmark


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple[str, dict, str]:
    out = tmp_path_factory.mktemp("gpu_parse") / "gpu_parse.md"
    # a roomier budget than --tiny's 80 s, so that a busy CI machine does not cut a cell
    command = [sys.executable, str(REPO / "benchmarks" / "gpu_parse.py"), "--tiny", "--budget-s", "240", "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out.read_text(encoding="utf-8"), json.loads(out.with_suffix(".json").read_text(encoding="utf-8")), done.stdout


def test_every_docling_cell_is_measured_without_failures(tiny_run):
    _, data, _ = tiny_run
    cells = {(row["actors"], row["batch_size"]) for row in data["docling"]}
    assert cells == {(1, 1), (1, 4), (2, 1), (2, 4)}
    for row in data["docling"]:
        assert "error" not in row, row
        assert row["complete"] and row["failures"] == 0
        assert row["pages"] == data["pdf_text"]["pages"] and row["pages_per_s"] > 0
        assert row["load_s_max"] > 0 and 0 < row["page_ms_p50"] <= row["page_ms_p95"]
        assert row["gpu_util_mean"] is None and row["gpu_mem_peak_mib"] is None  # CPU: not available
    assert data["pdf_text"]["pages_per_s"] > 0 and data["pdf_text"]["failures"] == 0


def test_every_caption_batch_size_is_measured(tiny_run):
    _, data, _ = tiny_run
    assert [row["batch_size"] for row in data["captions"]] == [1, 4]
    for row in data["captions"]:
        assert row["images"] == row["requested"] == 6 and row["errors"] == 0
        assert row["captions_per_s"] > 0 and row["prompt_tok_per_s"] > 0 and row["completion_tok_per_s"] > 0


def test_the_report_says_what_it_is_and_holds_the_rows(tiny_run):
    markdown, data, stdout = tiny_run
    assert markdown.startswith("# GPU parse benchmark — CPU smoke run with tiny random weights (NOT a GPU measurement)")
    assert "Docling weights: tiny random weights" in markdown and "Device: CPU" in markdown
    docling_part, caption_part = markdown.split("\nCaptions (")
    docling_rows = [line for line in docling_part.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(docling_rows) == 4 and all(line.endswith("| yes |") for line in docling_rows)
    caption_rows = [line for line in caption_part.splitlines() if line.startswith(("| 1 | 6/6", "| 4 | 6/6"))]
    assert len(caption_rows) == 2
    assert data["machine"]["docling_weights"] == "tiny random weights" and data["machine"]["gpu"] is None
    assert "docling actors=2 batch=4:" in stdout and "captions batch=4:" in stdout  # progress lines
