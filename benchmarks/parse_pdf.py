"""Measure PdfTextParser speed: ms per page and pages/s over a directory of PDFs.

    python benchmarks/parse_pdf.py [--dir golden/sources] [--repeat 5]

Prints a markdown table and writes it to ``benchmarks/results/parse_pdf.md``. Every
file is parsed ``--repeat`` times in this process (one thread); the median run counts.
Each file is parsed with figure crops (the default) and without them, runs interleaved,
so the cost of rendering crops is a ratio from one run.
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
    parsers = {"crops": PdfTextParser(), "no_crops": PdfTextParser(figure_crops=False)}
    seconds: dict[str, list[float]] = {name: [] for name in parsers}
    for _ in range(repeat):
        for name, parser in parsers.items():
            started = time.perf_counter()
            result = parser.parse(data, mime="application/pdf", filename=path.name)
            seconds[name].append(time.perf_counter() - started)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    pages = len(result.pages)
    return {"file": path.name, "status": result.status if result.status == "ok" else result.error,
            "pages": pages, "blocks": len(result.blocks), "figures": sum(b.kind == "figure" for b in result.blocks),
            "seconds": median["crops"], "seconds_no_crops": median["no_crops"],
            "ms_per_page": 1000 * median["crops"] / pages if pages else float("nan"),
            "ms_per_page_no_crops": 1000 * median["no_crops"] / pages if pages else float("nan")}


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
        "| file | status | pages | blocks | figures | ms/page (median) | ms/page without crops | ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {r['file']} | {r['status']} | {r['pages']} | {r['blocks']} | {r['figures']} | {r['ms_per_page']:.1f} "
              f"| {r['ms_per_page_no_crops']:.1f} | {r['seconds'] / r['seconds_no_crops']:.2f} |" for r in rows]
    pages = sum(r["pages"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    plain = sum(r["seconds_no_crops"] for r in rows)
    rate = pages / seconds if seconds else float("nan")
    lines += ["", f"**Total: {pages} pages in {seconds:.3f} s = {rate:.1f} pages/s** (single thread, figure crops on; "
              f"{seconds / plain:.2f}× the time without crops)", ""]
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
