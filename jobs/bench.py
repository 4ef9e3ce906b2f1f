"""Run one of the benchmark scripts in benchmarks/ on the cluster the job is submitted to."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

BENCHMARKS = ("ingest", "query", "embed", "parse_pdf", "bm25_compare", "gpu_pages")


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in BENCHMARKS:
        print(f"usage: python -m jobs.bench {{{'|'.join(BENCHMARKS)}}} [script options]", file=sys.stderr)
        sys.exit(2)
    script = Path(__file__).resolve().parents[1] / "benchmarks" / f"{sys.argv[1]}.py"
    sys.argv = [str(script), *sys.argv[2:]]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
