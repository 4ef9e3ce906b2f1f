"""Measure PdfTextParser's ruled-table finding: cost per page (tables on vs off) and what it finds.

    python benchmarks/pdf_tables.py [--dir golden/sources] [--dir /tmp/evidence-work/realdocs/corpus] [--repeat 3]

Each PDF is parsed with tables on (the default) and off, runs interleaved in one process,
so the ratio holds on a loaded machine; the median run counts. Beside them, the contender
the parser does not use: pdfplumber's own *lines* strategy, which reads the rules with
pdfminer (a second PDF interpreter), timed on the same searched pages, and its tables
compared with the parser's (same count, rows × columns and box within 1.5 pt). Golden PDFs' tables are
compared cell by cell with the rows ``golden/make_golden.py`` drew. Every table found on
the other PDFs is listed (page, size, first rows) for inspection by hand. Writes
``benchmarks/results/pdf_tables.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import statistics
import sys
import time
from pathlib import Path

import pdfplumber
import pypdfium2 as pdfium

from kb_ray.parsing import pdf_tables
from kb_ray.parsing.pdf_text import PdfTextParser, _display_transform

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
    searched = searched_pages(data)
    contender_s, theirs = pdfminer_contender(data, searched)
    width, height = result.pages[0].width, result.pages[0].height  # boxes back to points (one page size per file)
    ours: dict[int, list] = {}
    for t in tables:
        x0, y0, x1, y1 = t.bbox
        rows = t.attrs["rows"]
        ours.setdefault(t.page - 1, []).append(((x0 * width, y0 * height, x1 * width, y1 * height), len(rows), max(map(len, rows))))
    agree = sum(same_tables(ours.get(i, []), theirs[i]) for i in searched)
    return {"file": path.name, "pages": len(result.pages), "on": median["on"], "off": median["off"],
            "searched": len(searched), "contender_s": contender_s, "agree": agree,
            "tables": tables, "notes": result.notes,
            "chars_on": sum(len(b.text) for b in result.blocks), "chars_off": sum(len(b.text) for b in results["off"].blocks)}


def searched_pages(data: bytes) -> list[int]:
    pdf = pdfium.PdfDocument(data)
    try:
        return [i for i in range(len(pdf)) if pdf_tables.page_rules(pdf[i], _display_transform(pdf[i])[2])[0] == "search"]
    finally:
        pdf.close()


def pdfminer_contender(data: bytes, pages: list[int]) -> tuple[float, dict[int, list]]:
    """pdfplumber's lines strategy (edges read by pdfminer) on ``pages``: seconds and tables."""
    settings = {**pdf_tables.FINDER_SETTINGS, "vertical_strategy": "lines", "horizontal_strategy": "lines"}
    started, found = time.perf_counter(), {}
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for index in pages:
            page = pdf.pages[index]
            x, y = page.bbox[0], page.bbox[1]
            found[index] = [((t.bbox[0] - x, t.bbox[1] - y, t.bbox[2] - x, t.bbox[3] - y), len(t.rows),
                             max(len(r.cells) for r in t.rows)) for t in page.find_tables(settings)]
            page.close()
    return time.perf_counter() - started, found


def same_tables(ours: list, theirs: list) -> bool:
    """Same tables (≥ 2 rows and columns, as the parser keeps) up to 1.5 pt in the box."""
    theirs = sorted(t for t in theirs if t[1] >= pdf_tables.MIN_ROWS and t[2] >= pdf_tables.MIN_COLUMNS)
    return len(ours) == len(theirs) and all(
        a[1:] == b[1:] and all(abs(u - v) <= 1.5 for u, v in zip(a[0], b[0])) for a, b in zip(sorted(ours), theirs))


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
    out = [f"# PDF ruled tables (PdfTextParser: pdfium rules through pdfplumber {pdfplumber.__version__} TableFinder)", "",
           f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {machine()}; the machine was shared "
           f"with other jobs, so compare the on/off columns (interleaved runs, median of {repeat}), not absolute times.",
           "", "## Cost", "",
           "| file | pages | pages searched | tables | s (tables off) | s (tables on) | ms/page off | ms/page on | on/off "
           "| pdfminer lines strategy on the searched pages, s | searched pages where its tables = ours |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['file']} | {r['pages']} | {r['searched']} | {len(r['tables'])} | {r['off']:.3f} | {r['on']:.3f} | "
                   f"{1000 * r['off'] / r['pages']:.1f} | {1000 * r['on'] / r['pages']:.1f} | {r['on'] / r['off']:.2f} | "
                   f"{r['contender_s']:.3f} | {r['agree']}/{r['searched']} |")
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
