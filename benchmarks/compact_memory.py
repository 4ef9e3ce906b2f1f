"""Driver memory of the ingest's periodic compaction, by compaction target size.

    .venv/bin/python benchmarks/compact_memory.py [--targets-mb 128,64,32,16] [--live-mb 100] [--repeat 2]

The ingest committer compacts the tables it wrote every ``ingest.compact_every_batches``
micro-batches (kb_ray/catalog/maintenance.py ``compact_small_files``). delta-rs rewrites
every file below the target, so the compacted file is read and written again, in the
driver's memory, until it reaches the target. Each variant runs in a fresh child process:
a real catalog's ``embeddings`` table (384-dim float32 vectors, random) grows by appends of
256 rows, compacted every 32 appends with the target under test, until ``--live-mb`` of
Parquet is live; then 32 more appends and one last compaction. The child reports its RSS
after imports, its peak RSS (VmHWM) over the whole run, the RSS before the last compaction,
the peak during it (the kernel's high-water mark reset just before), and that compaction's
seconds. Appends a section to benchmarks/results/compact_memory.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIM, ROWS, BATCHES_PER_COMPACTION = 384, 256, 32


def memory_mb() -> dict[str, int]:
    fields = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            name, value = line.split(":", 1)
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) // 1024
    return fields


def child(target_mb: int, live_mb: int) -> dict:
    import numpy as np

    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.catalog.maintenance import compact_small_files
    from kb_ray.ingest.rows import to_table

    rng = np.random.default_rng(0)

    def append() -> None:
        vectors = rng.standard_normal((ROWS, DIM), dtype=np.float32)
        catalog.append("embeddings", to_table("embeddings", [
            {"embedder_fp": "fp", "embed_text_sha": os.urandom(16).hex(), "dim": DIM, "vector": v.tolist()}
            for v in vectors]))

    def live_bytes() -> int:
        return sum(os.path.getsize(uri.removeprefix("file://")) for uri in catalog.delta_table("embeddings").file_uris())

    with tempfile.TemporaryDirectory() as folder:
        catalog = DeltaCatalog.open(folder + "/kb")
        append()
        start = memory_mb()["VmRSS"]
        while live_bytes() < live_mb << 20:
            for _ in range(BATCHES_PER_COMPACTION):
                append()
            compact_small_files(catalog, ["embeddings"], target_size=target_mb << 20)
        for _ in range(BATCHES_PER_COMPACTION):
            append()
        before = memory_mb()
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")  # reset VmHWM: the next peak is the last compaction's
        began = time.perf_counter()
        metrics = compact_small_files(catalog, ["embeddings"], target_size=target_mb << 20)["embeddings"]
        seconds = time.perf_counter() - began
        peak = memory_mb()["VmHWM"]
        return {"target_mb": target_mb, "live_mb": round(live_bytes() / 2**20), "rss_start_mb": start,
                "peak_rss_mb": max(before["VmHWM"], peak), "rss_before_last_mb": before["VmRSS"],
                "last_compaction_peak_mb": peak, "last_compaction_s": round(seconds, 2),
                "files_rewritten": metrics.get("numFilesRemoved", 0),
                "files": len(catalog.delta_table("embeddings").file_uris())}


def run_child(target_mb: int, live_mb: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(target_mb), "--live-mb", str(live_mb)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def render(rows: list[dict], *, live_mb: int) -> str:
    head = ("| target MiB | live MiB | RSS after imports | peak RSS of the run | RSS before the last compaction | "
            "peak during it | its seconds | files it rewrote | files after |")
    lines = [f"\n## Run of {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC (embeddings {DIM}-dim, appends of {ROWS} "
             f"rows, compaction every {BATCHES_PER_COMPACTION}, until {live_mb} MiB live; MB)\n", head,
             "|" + "---:|" * 9]
    for r in rows:
        lines.append(f"| {r['target_mb']} | {r['live_mb']} | {r['rss_start_mb']} | {r['peak_rss_mb']} | "
                     f"{r['rss_before_last_mb']} | {r['last_compaction_peak_mb']} | {r['last_compaction_s']} | "
                     f"{r['files_rewritten']} | {r['files']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets-mb", default="128,64,32,16")
    parser.add_argument("--live-mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2, help="rounds, the targets interleaved in each")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/compact_memory.md"))
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.live_mb)))
        return 0
    rows = [run_child(int(t), args.live_mb) for _ in range(args.repeat) for t in args.targets_mb.split(",")]
    text = render(rows, live_mb=args.live_mb)
    print(text)
    with open(args.out, "a", encoding="utf-8") as out:
        out.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
