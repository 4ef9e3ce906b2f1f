"""What bounding every parser costs: a document parsed in the worker vs in the isolated child.

    python benchmarks/parse_isolation.py [--dir golden/sources] [--dir DIR ...] [--repeat 3]

Two routers built from one ``ParseSettings`` but ``isolate`` off / on (kb_ray/parsing/isolation.py),
warm (each parses every file once first; the child's start-up is timed separately), then
every file ``--repeat`` times with the two interleaved, so the overhead is a ratio from one
run. Writes ``benchmarks/results/parse_isolation.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from pathlib import Path

from kb_ray.config import ParseSettings
from kb_ray.processing import build_router

ROOT = Path(__file__).resolve().parents[1]


def timed(router, data: bytes, name: str) -> tuple[float, str]:
    started = time.perf_counter()
    result = router.parse(data, filename=name)
    return time.perf_counter() - started, result.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", action="append", default=None, help="documents to parse (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "parse_isolation.md"))
    args = parser.parse_args()
    dirs = [Path(d) for d in (args.dir or [ROOT / "golden" / "sources"])]
    files = sorted(p for d in dirs for p in d.iterdir() if p.is_file())
    routers = {"in worker": build_router(ParseSettings(isolate=False)), "isolated": build_router(ParseSettings())}
    started = time.perf_counter()
    timed(routers["isolated"], b"warm up", "start.txt")
    child_start = time.perf_counter() - started
    docs = [(p.name, p.read_bytes()) for p in files]
    for name, data in docs:  # warm: imports and lazily built parsers on both sides
        for router in routers.values():
            timed(router, data, name)
    seconds: dict[str, list[float]] = {key: [] for key in routers}
    statuses: dict[str, set[str]] = {key: set() for key in routers}
    for _ in range(args.repeat):
        totals = dict.fromkeys(routers, 0.0)
        for name, data in docs:
            for key, router in routers.items():
                spent, status = timed(router, data, name)
                totals[key] += spent
                statuses[key].add(status)
        for key in routers:
            seconds[key].append(totals[key])
    median = {key: statistics.median(values) for key, values in seconds.items()}
    size = sum(len(data) for _, data in docs)
    lines = [
        f"# Parser isolation cost ({dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC)", "",
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}. Command: "
        f"`python benchmarks/parse_isolation.py {' '.join('--dir ' + str(d) for d in args.dir or [])} "
        f"--repeat {args.repeat}`.".replace("  ", " "), "",
        f"{len(docs)} files ({size / 1e6:.1f} MB) from {', '.join(str(d) for d in dirs)}; the median of "
        f"{args.repeat} passes over all of them, the two routers interleaved per file, warm.", "",
        "| router | seconds per pass | ms per document | ratio to in-worker |", "| --- | ---: | ---: | ---: |",
    ]
    for key in routers:
        lines.append(f"| {key} | {median[key]:.2f} | {1000 * median[key] / len(docs):.1f} | "
                     f"{median[key] / median['in worker']:.2f} |")
    lines += ["", f"Starting the child (spawn, imports, first parse): {child_start:.2f} s, once per parse worker "
              "(and after a timeout or crash). Outcomes: " + ", ".join(f"{k} {sorted(v)}" for k, v in statuses.items()),
              ""]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    routers["isolated"].close()


if __name__ == "__main__":
    main()
