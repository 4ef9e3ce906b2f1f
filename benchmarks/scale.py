"""Ingest cost against catalog size: does a micro-batch cost the same at 10k documents as at 1k?

    .venv/bin/python benchmarks/scale.py [--sizes 1000,10000] [--baseline /work/main --baseline-size 2000]

Each size runs in a child process: a fresh catalog, generated small text files (seeded),
the tiny random-weight embedder (built into a temp dir by
``kb_ray.embedding.tiny.build_tiny_text_model``), conf/local.yaml otherwise. The child
times every driver-side micro-batch commit (lookups + commits, compaction included), the
gap between commits, the driver's RSS, then re-ingests the unchanged corpus. With
``--baseline DIR`` the same child runs once more with ``PYTHONPATH=DIR`` (another
checkout, e.g. the code before this change) on the same corpus, in the same run.
Appends a section to benchmarks/results/scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("pump valve pressure flow sensor motor seal bearing impeller outlet inlet filter screen housing torque "
         "voltage current winding thermal relay fuse cable gasket flange coupling shaft rotor stator").split()


def write_corpus(directory: Path, n: int) -> Path:
    """``n`` small text files, 500 per folder (the listing streams one folder per batch)."""
    rng = random.Random(n)
    for i in range(n):
        folder = directory / f"d{i // 500:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        text = "\n\n".join(" ".join(rng.choices(WORDS, k=rng.randint(20, 60))) + f" {i}." for _ in range(2))
        (folder / f"f{i:07d}.txt").write_text(text, encoding="utf-8")
    return directory


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_parts_mb() -> tuple[float, float, float]:
    """The driver's RSS split: anonymous (its own heap), file-backed and shared memory (Ray's object
    store segments the driver has read objects from count here, shared with the store)."""
    parts = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            name, _, value = line.partition(":")
            if name in ("RssAnon", "RssFile", "RssShmem"):
                parts[name] = int(value.split()[0]) / 1024
    return parts.get("RssAnon", 0.0), parts.get("RssFile", 0.0), parts.get("RssShmem", 0.0)


def child(args: argparse.Namespace) -> None:
    """Run in the child: one full ingest and one unchanged re-ingest, timed."""
    from kb_ray.config import load_config
    from kb_ray.ingest import commit as commit_module
    from kb_ray.ingest.run import run_ingest

    # commit, started, seconds, rss, documents, rss anon, rss file, rss shmem
    commits: list[tuple[int, float, float, float, int, float, float, float]] = []
    original = commit_module.MicroBatchCommitter.commit

    def timed_commit(self, batch, *, batch_no):
        started = time.perf_counter()
        outcome = original(self, batch, batch_no=batch_no)
        commits.append((batch_no, started, time.perf_counter() - started, rss_mb(), outcome.summary.num_rows,
                        *rss_parts_mb()))
        return outcome

    commit_module.MicroBatchCommitter.commit = timed_commit
    config = load_config(ROOT / "conf" / "local.yaml", overrides=[
        f"kb_root={args.kb}", f"ingest.sources=[{args.corpus}]", f"ingest.micro_batch_docs={args.micro_batch}",
        f"embedding.model_path={args.tiny}", "embedding.model_id=tiny"])
    rss_start = rss_mb()
    started = time.perf_counter()
    report = run_ingest(config)
    full = time.perf_counter() - started
    started = time.perf_counter()
    again = run_ingest(config)
    unchanged = time.perf_counter() - started
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.catalog.verify import verify_catalog

    verified = verify_catalog(DeltaCatalog.open(str(args.kb), create=False)).ok(strict=True)
    json.dump({"verify_ok": verified, "micro_batches": report.micro_batches, "full_s": full, "unchanged_s": unchanged, "documents": report.documents,
               "unchanged_documents": again.documents["unchanged"], "rss_start_mb": rss_start,
               "rss_end_mb": rss_mb(), "commits": commits, "python_path": os.environ.get("PYTHONPATH", "")},
              open(args.out, "w"))


def run_child(code_dir: Path, corpus: Path, tiny: str, work: Path, label: str, micro_batch: int) -> dict:
    out = work / f"{label}.json"
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--kb", str(work / f"kb-{label}"),
               "--corpus", str(corpus), "--tiny", tiny, "--out", str(out), "--micro-batch", str(micro_batch)]
    subprocess.run(command, env=env, check=True, cwd=code_dir)
    return json.loads(out.read_text())


def summarize(result: dict) -> dict:
    commits = result["commits"]
    tenth = max(1, len(commits) // 10)
    cycle = min(len(commits), 64)  # two compaction cycles (compact_every_batches=32): the sawtooth averaged
    mean = lambda rows: sum(row[2] for row in rows) / len(rows)  # noqa: E731
    gaps = [b[1] - a[1] for a, b in zip(commits, commits[1:])] or [0.0]
    per_doc = lambda rows: 1000 * sum(r[2] for r in rows) / max(1, sum(r[4] if len(r) > 4 else 16 for r in rows))  # noqa: E731
    seen = result["documents"]["seen"]
    span = commits[-1][1] - commits[0][1] if len(commits) > 1 else 0.0
    steady = seen * (len(commits) - 1) / len(commits) / span if span else 0.0  # after Ray start and model load
    return {"docs": seen, "docs_per_s": seen / result["full_s"], "steady_docs_per_s": steady, "full_s": result["full_s"],
            "unchanged_s": result["unchanged_s"], "unchanged_pct": 100 * result["unchanged_s"] / result["full_s"],
            "batches": len(commits), "commit_first_s": mean(commits[:tenth]), "commit_last_s": mean(commits[-tenth:]),
            "gap_first_s": sum(gaps[:tenth]) / len(gaps[:tenth]), "gap_last_s": sum(gaps[-tenth:]) / len(gaps[-tenth:]),
            "cycle_first_s": mean(commits[:cycle]), "cycle_last_s": mean(commits[-cycle:]),
            "rss_growth_mb": max(row[3] for row in commits) - commits[0][3] if commits else 0.0,
            "anon_growth_mb": max(row[5] for row in commits) - commits[0][5] if commits and len(commits[0]) > 5 else None,
            "commit_ms_per_doc_first": per_doc(commits[:tenth]), "commit_ms_per_doc_last": per_doc(commits[-tenth:]),
            "micro_batches": result.get("micro_batches", len(commits)), "verify_ok": result.get("verify_ok")}


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def render(rows: list[tuple[str, dict]], args: argparse.Namespace) -> str:
    head = ("| code | files | docs/s (steady, between first and last commit) | full s | unchanged re-ingest s (% of full) | "
            "micro-batches / commits | commit s per commit first 10% → last 10% | commit s first 64 → last 64 commits | "
            "gap between commits first → last | commit ms per document first 10% → last 10% | driver RSS growth MB "
            "(of it anonymous) | verify --strict |")
    lines = [f"\n## Run of {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC (micro_batch_docs={args.micro_batch}, "
             "tiny embedder, 2 shared CPU cores)\n", head, "|" + "---|" * 12]
    for label, s in rows:
        lines.append(f"| {label} | {s['docs']} | {s['docs_per_s']:.1f} ({s['steady_docs_per_s']:.1f}) | {s['full_s']:.1f} | {s['unchanged_s']:.1f} "
                     f"({s['unchanged_pct']:.1f}%) | {s['micro_batches']} / {s['batches']} | {s['commit_first_s']:.3f} → "
                     f"{s['commit_last_s']:.3f} | {s['cycle_first_s']:.3f} → {s['cycle_last_s']:.3f} | "
                     f"{s['gap_first_s']:.3f} → {s['gap_last_s']:.3f} | "
                     f"{s['commit_ms_per_doc_first']:.1f} → {s['commit_ms_per_doc_last']:.1f} | "
                     f"{s['rss_growth_mb']:.0f} ({_mb(s.get('anon_growth_mb'))}) | {s['verify_ok']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated corpus sizes (add 100000 if time)")
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to run beside this one")
    parser.add_argument("--baseline-size", type=int, default=2000)
    parser.add_argument("--keep", type=Path, default=None, help="copy each child's raw timings JSON here")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "scale.md")
    for name in ("--kb", "--corpus", "--tiny", "--out"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    sys.path.insert(0, str(ROOT))
    from kb_ray.embedding.tiny import build_tiny_text_model

    rows = []
    with tempfile.TemporaryDirectory(prefix="kb-scale-") as tmp:
        work = Path(tmp)
        tiny = build_tiny_text_model(work / "tiny")
        plan = [("new", ROOT, int(size)) for size in args.sizes.split(",")]
        if args.baseline:
            plan.insert(0, ("old", args.baseline, args.baseline_size))
            plan.insert(1, ("new", ROOT, args.baseline_size))
        for label, code, size in plan:
            corpus = work / f"corpus-{size}"
            if not corpus.exists():
                write_corpus(corpus, size)
            summary = summarize(run_child(code, corpus, tiny, work, f"{label}-{size}", args.micro_batch))
            rows.append((label, summary))
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"{label}-{size}.json").write_bytes((work / f"{label}-{size}.json").read_bytes())
            print(json.dumps({"code": label, **summary}), flush=True)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    with args.results.open("a", encoding="utf-8") as handle:
        handle.write(render(rows, args))


if __name__ == "__main__":
    main()
