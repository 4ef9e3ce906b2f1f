"""Measure PdfTextParser's ruled-table finding: cost per page (tables on vs off) and what it finds.

    python benchmarks/pdf_tables.py [--dir golden/sources] [--dir /tmp/evidence-work/realdocs/corpus] [--repeat 3]

Each PDF is parsed with tables on (the default) and off, runs interleaved in one process,
so the ratio holds on a loaded machine; the median run counts. Golden PDFs' tables are
compared cell by cell with the rows ``golden/make_golden.py`` drew. Every table found on
the other PDFs is listed (page, size, first rows) for inspection by hand. Writes
``benchmarks/results/pdf_tables.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
from pathlib import Path

import pdfplumber

from kb_ray.parsing.pdf_text import PdfTextParser

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.parse_pdf import machine  # noqa: E402
from golden.make_golden import MANUAL_BLOCKS, REPORT_BLOCKS  # noqa: E402

GOLDEN_TABLES = {"manual.pdf": [p for k, p in MANUAL_BLOCKS if k == "table"],
                 "long_report.pdf": [p for k, p in REPORT_BLOCKS if k == "table"]}


def measure(path: Path, repeat: int) -> dict:
    data = path.read_bytes()
    parsers = {"on": PdfTextParser(), "off": PdfTextParser(tables=False)}
    seconds: dict[str, list[float]] = {name: [] for name in parsers}
    results = {}
    for _ in range(repeat):
        for name, parser in parsers.items():
            started = time.perf_counter()
            results[name] = parser.parse(data, mime="application/pdf", filename=path.name)
            seconds[name].append(time.perf_counter() - started)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    result = results["on"]
    tables = [b for b in result.blocks if b.kind == "table"]
    return {"file": path.name, "pages": len(result.pages), "on": median["on"], "off": median["off"],
            "tables": tables, "notes": result.notes,
            "chars_on": sum(len(b.text) for b in result.blocks), "chars_off": sum(len(b.text) for b in results["off"].blocks)}


def golden_check(row: dict) -> list[str]:
    expected = GOLDEN_TABLES.get(row["file"])
    if expected is None:
        return []
    lines = []
    for n, (rows, _) in enumerate(expected):
        truth = [[" ".join(cell.split()) for cell in r] for r in rows]
        found = row["tables"][n].attrs["rows"] if n < len(row["tables"]) else []
        cells = sum(len(r) for r in truth)
        same = sum(1 for r, fr in zip(truth, found) for a, b in zip(r, fr) if a == b)
        lines.append(f"| {row['file']} | table {n + 1} | {len(truth)}×{len(truth[0])} | "
                     f"{len(found)}×{max((len(r) for r in found), default=0)} | {same}/{cells} |")
    return lines


def report(rows: list[dict], repeat: int) -> str:
    out = [f"# PDF ruled tables (PdfTextParser, pdfplumber {pdfplumber.__version__} lines strategy)", "",
           f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {machine()}; the machine was shared "
           f"with other jobs, so compare the on/off columns (interleaved runs, median of {repeat}), not absolute times.",
           "", "## Cost", "",
           "| file | pages | tables | s (tables off) | s (tables on) | ms/page off | ms/page on | on/off |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['file']} | {r['pages']} | {len(r['tables'])} | {r['off']:.3f} | {r['on']:.3f} | "
                   f"{1000 * r['off'] / r['pages']:.1f} | {1000 * r['on'] / r['pages']:.1f} | {r['on'] / r['off']:.2f} |")
    out += ["", "## Golden tables against the rows make_golden.py drew", "",
            "| file | table | drawn | found | cells equal |", "|---|---|---|---|---:|"]
    out += [line for r in rows for line in golden_check(r)]
    out += ["", "## Every table found (for inspection)", ""]
    for r in rows:
        for t in r["tables"]:
            cells = t.attrs["rows"]
            sample = " / ".join(" | ".join(c[:18] for c in row) for row in cells[:2])
            out.append(f"- {r['file']} p{t.page}: {len(cells)}×{max(len(c) for c in cells)}, "
                       f"header_rows={t.attrs['header_rows']}: `{sample[:160]}`")
        out += [f"- {r['file']}: note: {note}" for note in r["notes"]]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", action="append", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pdf_tables.md")
    args = parser.parse_args()
    paths = sorted(p for d in (args.dir or [ROOT / "golden" / "sources"]) for p in d.glob("*.pdf"))
    rows = [measure(path, args.repeat) for path in paths]
    text = report(rows, args.repeat)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
