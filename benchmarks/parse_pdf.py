"""Measure PdfTextParser speed: ms per page and pages/s over a directory of PDFs.

    python benchmarks/parse_pdf.py [--dir golden/sources] [--repeat 5]

Prints a markdown table and writes it to ``benchmarks/results/parse_pdf.md``. Every
file is parsed ``--repeat`` times in this process (one thread); the median run counts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import pypdfium2

from kb_ray.parsing.pdf_text import PdfTextParser

ROOT = Path(__file__).resolve().parents[1]


def measure(path: Path, repeat: int) -> dict:
    data = path.read_bytes()
    parser = PdfTextParser()
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = parser.parse(data, mime="application/pdf", filename=path.name)
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    pages = len(result.pages)
    return {"file": path.name, "status": result.status if result.status == "ok" else result.error,
            "pages": pages, "blocks": len(result.blocks), "seconds": median,
            "ms_per_page": 1000 * median / pages if pages else float("nan")}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        names = [l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                 if l.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return (f"{cpu}, nproc={os.cpu_count()}, Python {platform.python_version()}, "
            f"pypdfium2 {pypdfium2.PYPDFIUM_INFO} (pdfium {pypdfium2.PDFIUM_INFO}), {platform.system()}")


def report(rows: list[dict], directory: Path, repeat: int) -> str:
    lines = [
        "# PdfTextParser speed",
        "",
        f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {machine()}",
        f"- input: `{directory}` ({len(rows)} files), median of {repeat} runs, one thread",
        "",
        "| file | status | pages | blocks | ms/page (median) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    lines += [f"| {r['file']} | {r['status']} | {r['pages']} | {r['blocks']} | {r['ms_per_page']:.1f} |"
              for r in rows]
    pages = sum(r["pages"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    rate = pages / seconds if seconds else float("nan")
    lines += ["", f"**Total: {pages} pages in {seconds:.3f} s = {rate:.1f} pages/s** (single thread)", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=ROOT / "golden" / "sources")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "parse_pdf.md")
    args = parser.parse_args(argv)
    files = sorted(args.dir.glob("*.pdf"))
    if not files:
        print(f"no PDFs under {args.dir}", file=sys.stderr)
        return 1
    rows = []
    for path in files:
        rows.append(measure(path, args.repeat))
        print(f"  {path.name}: {rows[-1]['ms_per_page']:.1f} ms/page", file=sys.stderr)
    text = report(rows, args.dir, args.repeat)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
