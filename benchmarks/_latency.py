"""Query latency of several search variants, interleaved query by query so that load on a
shared machine falls on every variant alike (tree_cost.py, graph_cost.py, contextual_cost.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def load_queries(path: str | Path, limit: int | None = None) -> list[str]:
    return [json.loads(line)["query"] for line in Path(path).read_text().splitlines() if line.strip()][:limit]


def timed(work: Callable[[], object]) -> float:
    """Seconds one call of ``work`` takes."""
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def interleaved_latency(variants: dict[str, Callable[[str], object]], queries: list[str], *,
                        warmup: int = 5) -> dict[str, list[float]]:
    """Milliseconds per query of each variant (a name → a search of one query), after a warm-up;
    prints p50 and p95 of each."""
    for query in queries[:warmup]:
        for search in variants.values():
            search(query)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for query in queries:
        for name, search in variants.items():
            times[name].append(timed(lambda: search(query)) * 1000)
    for name, ms in times.items():
        print(f"{name:10s} {len(ms)} queries: p50 {np.percentile(ms, 50):.1f} ms, p95 {np.percentile(ms, 95):.1f} ms")
    return times
