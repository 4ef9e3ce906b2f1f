"""What the index-cost benchmarks share (tree_cost.py, graph_cost.py, contextual_cost.py): the
live generation's rows, the medians per 1,000 chunks, and query latency of several search
variants interleaved query by query, so that load on a shared machine falls on each alike."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def live_generation(overrides: list[str]):
    """``(config, manifest, session, hydration rows, vectors)`` of the live generation, read at
    the catalog versions it was built from."""
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.config import load_config
    from kb_ray.index import build as build_module
    from kb_ray.index.generations import load_manifest, read_current
    from kb_ray.index.rows import open_session, read_index_rows

    config = load_config(ROOT / "conf" / "local.yaml", overrides=overrides)
    manifest = load_manifest(config.kb_root, read_current(config.kb_root))
    connection = open_session(DeltaCatalog.open(config.kb_root, create=False), manifest.catalog_versions)
    hydration, vectors = read_index_rows(connection, manifest.embedder_fp)
    return config, manifest, connection, hydration, build_module._vectors(vectors)


def print_medians(runs: dict[str, list[float]], chunks: int) -> None:
    for name, seconds in runs.items():
        median = float(np.median(seconds))
        print(f"{name:8s} median {median:.3f} s = {1000 * median / chunks:.3f} s per 1,000 chunks")


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
