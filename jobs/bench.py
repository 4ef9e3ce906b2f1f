"""Run one of the benchmark scripts in benchmarks/ on the cluster the job is submitted to.

    python -m jobs.bench --help            # every benchmark with its one-line purpose
    python -m jobs.bench NAME [options]    # run benchmarks/NAME.py (or benchmarks/NAME/__main__.py)

The list is read from benchmarks/ itself (each script's first docstring line), so a new
script is listed without touching this file.
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmarks() -> dict[str, Path]:
    """Benchmark name → script: top-level scripts not starting with ``_``, and ``peers/*.py`` mains."""
    found = {path.stem: path for path in sorted(BENCHMARKS_DIR.glob("*.py")) if not path.stem.startswith("_")}
    for path in sorted(BENCHMARKS_DIR.glob("*/*.py")):
        if not path.stem.startswith("_") and "__main__" in path.read_text(encoding="utf-8"):
            found[f"{path.parent.name}/{path.stem}"] = path
    return found


def purpose(script: Path) -> str:
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return docstring.strip().splitlines()[0] if docstring.strip() else ""


def usage() -> str:
    rows = [f"  {name:<28} {purpose(path)}" for name, path in benchmarks().items()]
    return "usage: python -m jobs.bench NAME [script options]   (NAME --help: that script's options)\n\n" \
           "benchmarks:\n" + "\n".join(rows)


def main() -> None:
    found = benchmarks()
    if len(sys.argv) < 2:
        print(usage(), file=sys.stderr)
        sys.exit(2)
    if sys.argv[1] in ("-h", "--help"):
        print(usage())
        sys.exit(0)
    if sys.argv[1] not in found:
        print(f"unknown benchmark {sys.argv[1]!r}\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    script = found[sys.argv[1]]
    sys.argv = [str(script), *sys.argv[2:]]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
