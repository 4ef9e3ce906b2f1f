"""Parse files through the router as the ingest configures it (isolated, default limits) in a
process of its own, and print each result and the peak resident memory of the parser
processes (``ru_maxrss`` of this process's reaped children: only those) as JSON.

    python -m tests.parsing.bomb_probe MAX_SECONDS FILE...
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from kb_ray.config import ParseSettings
from kb_ray.processing import build_router


def main(max_seconds: float, paths: list[str]) -> None:
    router = build_router(ParseSettings(max_seconds=max_seconds))
    results = []
    try:
        for path in map(Path, paths):
            started = time.perf_counter()
            result = router.parse(path.read_bytes(), filename=path.name)
            results.append({"status": result.status, "reason": result.reason, "detail": result.detail,
                            "seconds": time.perf_counter() - started})
    finally:
        router.close()  # the last child is reaped too, so its peak counts in RUSAGE_CHILDREN
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"results": results, "child_peak_rss_mib": peak_kib / 1024}))


if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2:])
