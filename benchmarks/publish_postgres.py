"""Postgres publication speed: rows/s of ``kb-ray publish postgres`` into a throw-away local server.

    .venv/bin/python benchmarks/publish_postgres.py [--golden-kb PATH] [--no-golden] [--n 10000]

Corpora: the golden catalog (``--golden-kb`` names an ingested one; default: ingest
golden/sources into a temporary folder first, ~1-2 min on 2 CPUs) and ``--n`` synthetic chunks
written straight to Delta (benchmarks/query.py's corpus: Zipf pseudo-word texts, random unit
vectors of dim 384). Each is built into a one-shard generation (flat up to
``index.flat_max_vectors``), then published three times into a fresh database on a local
server (tests/publish/postgres_server.py; fsync off, as in the tests): the first publish creates
the tables, the second is the no-op republish. Reported per corpus: total seconds and rows/s of
the first publish, its read (hydration + FAISS, chunk and passage vectors), COPY of the rows and
of the passage vectors (binary, 2,000-row batches) and index (HNSW cosine on both tables + GIN
tsvector + B-trees + the passages' foreign key, ANALYZE) seconds, and the republish's seconds.
The golden generation has passage vectors (the default ``index.passage_chars``); the synthetic
catalog embeds no passages, so its passage table is empty.
Writes benchmarks/results/publish_postgres.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kb_ray.config import load_config  # noqa: E402
from kb_ray.index import build_index  # noqa: E402
from kb_ray.publish.postgres import PostgresPublisher  # noqa: E402
from tests.publish.postgres_server import LocalPostgres, find_postgres  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "publish_postgres.md"


def golden_root(args, work: Path) -> str:
    if args.golden_kb:
        return args.golden_kb
    import ray

    from kb_ray.runtime import WORKER_ENV
    from tests.index_fixtures import ingest_golden_once

    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": dict(WORKER_ENV)})
    try:
        return ingest_golden_once(work)
    finally:
        ray.shutdown()


def synthetic_root(n: int, work: Path) -> str:
    from benchmarks.query import synthetic_texts, write_catalog

    rng = np.random.default_rng(0)
    root = str(work / "synthetic_kb")
    write_catalog(root, synthetic_texts(n, rng), embedder_fp="fp_synthetic_publish", rng=rng)
    return root


def measure(name: str, kb_root: str, server: LocalPostgres) -> dict:
    import psycopg

    config = load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={kb_root}", "index.shards=1"])
    started = time.perf_counter()
    manifest = build_index(config)
    build_s = time.perf_counter() - started
    database = f"bench_{name}"
    with psycopg.connect(server.dsn, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {database}")
        connection.execute(f"CREATE DATABASE {database}")
    publisher = PostgresPublisher(config, server.dsn.rsplit("/", 1)[0] + f"/{database}")
    first = publisher.publish()
    again = publisher.publish()
    assert first.action == "published" and again.action == "unchanged", (first, again)
    print(f"{name}: {first.rows} rows in {first.seconds:.2f} s ({first.rows_per_s:.0f} rows/s) {first.timings}; "
          f"republish {again.seconds:.2f} s", flush=True)
    return {"name": name, "rows": first.rows, "passages": first.passages, "dim": manifest.dim,
            "dense": manifest.shards[0].dense_type,
            "build_s": build_s, "publish_s": first.seconds, "rows_per_s": first.rows_per_s, **first.timings,
            "republish_s": again.seconds}


def render(results: list[dict]) -> str:
    lines = [
        "# Postgres publication speed", "",
        f"`benchmarks/publish_postgres.py`, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"{platform.machine()}, {os.cpu_count()} vCPU {_cpu_model()} (shared with other work: load varies), "
        "local Postgres (tests/publish/postgres_server.py, fsync off), one-shard generations.", "",
        "| corpus | rows | passages | dim | FAISS | publish s | rows/s | read s | COPY s | COPY rows/s "
        "| passages COPY s | index s | republish s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        copy_rate = r["rows"] / r["copy"] if r.get("copy") else 0
        lines.append(f"| {r['name']} | {r['rows']} | {r['passages']} | {r['dim']} | {r['dense']} | "
                     f"{r['publish_s']:.2f} | {r['rows_per_s']:.0f} | {r['read']:.2f} | {r['copy']:.2f} | "
                     f"{copy_rate:.0f} | {r['copy_passages']:.2f} | {r['index']:.2f} | {r['republish_s']:.2f} |")
    lines += ["", "rows/s is rows over the whole first publish (read the generation's files, create the chunk and "
              "passage tables, COPY, build the indexes, switch the views, in one transaction). COPY rows/s counts "
              "the rows' COPY alone. The republish reads the generation again and compares its active versions "
              "with the table's: a no-op.", ""]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return platform.processor() or "CPU"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden-kb", default=None, help="an ingested golden catalog (default: ingest one)")
    parser.add_argument("--no-golden", action="store_true")
    parser.add_argument("--n", type=int, default=10_000, help="synthetic chunks (0: none)")
    args = parser.parse_args()
    binaries, why = find_postgres()
    if binaries is None:
        sys.exit(f"publish_postgres: {why}")
    work = Path(tempfile.mkdtemp(prefix="kb_ray_publish_bench_"))
    server = LocalPostgres(binaries).start()
    try:
        results = []
        if not args.no_golden:
            results.append(measure("golden", golden_root(args, work), server))
        if args.n:
            results.append(measure(f"synthetic_{args.n}", synthetic_root(args.n, work), server))
    finally:
        server.stop()
    RESULTS.write_text(render(results), encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
