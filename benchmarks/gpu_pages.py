"""Visual pages: render + page-embed throughput, stored bytes per page, MaxSim latency.

    .venv/bin/python benchmarks/gpu_pages.py [--pages 256] [--search-pages 10000,100000]
        [--model-path DIR] [--device auto] [--out benchmarks/results/gpu_pages.md]

Sized for one call of at most 8 minutes on a lent H200. Corpus: the golden PDFs' pages,
cycled until ``--pages`` (golden-like: born-digital reports, manuals, a figure page).
Embeds them with the tiny random-weight ColQwen2 (built here) and, when ``--model-path``
points at real ColQwen2 weights (transformers-native ``-hf`` layout), with that model too.
Reports pages/s, peak GPU memory, bytes per page stored (float16 blob vs
list<fixed_size_list<float16>> vs the Delta-writable list<list<float32>>, raw and
mean_rows-pooled) and MaxSim search latency over synthetic multivectors (pooled first
stage + exact MaxSim of the shortlist — the PageIndex path; on a GPU also a brute-force
exact MaxSim over every token with torch). Writes ``--out``.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from kb_ray.config import PagesSettings  # noqa: E402
from kb_ray.pages import multivectors  # noqa: E402
from kb_ray.pages.render import PageRenderer  # noqa: E402


def render_corpus(n: int, dpi: int) -> tuple[list[bytes], float]:
    pdfs = sorted((REPO / "golden" / "sources").glob("*.pdf"))
    renderer, pngs, started = PageRenderer(dpi=dpi, max_pages=1000), [], time.perf_counter()
    while len(pngs) < n:
        for pdf in pdfs:
            pngs += [page.png for page in renderer.render(pdf.read_bytes()).pages]
    return pngs[:n], time.perf_counter() - started


def embed(settings: PagesSettings, pngs: list[bytes]) -> dict:
    import torch
    from PIL import Image

    from kb_ray.pages.embedder import PageEmbedder

    cuda = settings.device.startswith("cuda")
    embedder = PageEmbedder(settings)
    images = [Image.open(io.BytesIO(png)).convert("RGB") for png in pngs]
    embedder.embed_images(images[: settings.batch_size])  # warm-up
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    vectors = embedder.embed_images(images)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    return {"vectors": vectors, "pages_per_s": len(images) / seconds, "peak_gib": peak,
            "tokens": float(np.mean([v.shape[0] for v in vectors]))}


def bytes_per_page(vectors: list[np.ndarray], folder: Path) -> dict[str, float]:
    """Parquet (zstd, as the catalog writes) bytes per page for three layouts."""
    dim = vectors[0].shape[1]
    layouts = {
        "binary float16 blob (chosen)": pa.array([multivectors.encode(v) for v in vectors], pa.binary()),
        "list<fixed_size_list<float16>> (Parquet only)": pa.array(
            [v.astype(np.float16).tolist() for v in vectors], pa.list_(pa.list_(pa.float16(), dim))),
        "list<list<float32>> (Delta-writable list)": pa.array(
            [v.astype(np.float32).tolist() for v in vectors], pa.list_(pa.list_(pa.float32()))),
    }
    sizes = {}
    for name, column in layouts.items():
        path = folder / f"{abs(hash(name))}.parquet"
        pq.write_table(pa.table({"vectors": column}), path, compression="zstd")
        sizes[name] = path.stat().st_size / len(vectors)
    return sizes


def search_latency(pages: int, tokens: int, dim: int, shortlist: int, queries: int, device: str) -> dict:
    from kb_ray.index.dense import FaissShard, build_faiss_index

    rng = np.random.default_rng(0)
    store = np.empty((pages * tokens, dim), np.float16)
    for start in range(0, pages, 10_000):  # bounded temporaries
        stop = min(pages, start + 10_000)
        store[start * tokens:stop * tokens] = multivectors.normalize_rows(rng.normal(size=((stop - start) * tokens, dim)))
    offsets = np.arange(pages + 1, dtype=np.int64) * tokens
    pooled = multivectors.normalize_rows(store.reshape(pages, tokens, dim).astype(np.float32).mean(axis=1))
    index = FaissShard(build_faiss_index(pooled, "flat"), "flat")
    qs = [multivectors.normalize_rows(rng.normal(size=(20, dim))) for _ in range(queries)]
    started = time.perf_counter()
    for q in qs:
        rows, _ = index.search(multivectors.pooled_summary(q), shortlist)
        multivectors.maxsim_many(q, store, offsets, rows)
    result = {"shortlist_ms": (time.perf_counter() - started) * 1000 / queries}
    if device.startswith("cuda"):
        result["brute_gpu_ms"] = _brute_gpu(store, pages, tokens, qs)
    return result


def _brute_gpu(store: np.ndarray, pages: int, tokens: int, qs: list[np.ndarray]) -> float:
    import torch

    gpu = torch.from_numpy(store).cuda().view(pages, tokens, -1)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for q in qs:
        query = torch.from_numpy(q).half().cuda()
        torch.einsum("qd,ptd->pqt", query, gpu).amax(dim=2).sum(dim=1).topk(10)
    torch.cuda.synchronize()
    return (time.perf_counter() - started) * 1000 / len(qs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=256)
    parser.add_argument("--search-pages", default="10000,100000")
    parser.add_argument("--tokens-per-page", type=int, default=256, help="synthetic multivector length")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--model-path", default=None, help="real ColQwen2 weights (transformers-native layout)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dpi", type=int, default=144)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "gpu_pages.md"))
    args = parser.parse_args()
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    lines = _header(args, device)
    pngs, render_s = render_corpus(args.pages, args.dpi)
    lines += [f"Rendered {len(pngs)} pages at {args.dpi} dpi: {len(pngs) / render_s:.1f} pages/s "
              f"(mean PNG {np.mean([len(p) for p in pngs]) / 1024:.0f} KiB).", ""]
    with tempfile.TemporaryDirectory() as tmp:
        lines += _embed_section(args, device, pngs, Path(tmp))
    lines += _search_section(args, device)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def _header(args, device: str) -> list[str]:
    import torch

    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else None
    where = f"GPU {gpu}" if gpu else (f"CPU only ({os.cpu_count()} cores) — no GPU was lent to this run; "
                                      "small sizes, rerun on an H200 for the real numbers")
    return ["# Visual pages benchmark", "",
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.platform()}, torch {torch.__version__}.",
            f"Device: {where}.", f"Command: `python benchmarks/gpu_pages.py {' '.join(sys.argv[1:])}`", ""]


def _embed_section(args, device: str, pngs: list[bytes], tmp: Path) -> list[str]:
    from kb_ray.pages.tiny import build_tiny_colqwen2

    models = [("tiny ColQwen2 (random weights)", build_tiny_colqwen2(tmp / "tiny"))]
    if args.model_path:
        models.append((f"real: {Path(args.model_path).name}", args.model_path))
    lines = ["| model | pooling | pages/s | peak GPU GiB | vectors/page | layout | bytes/page |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for name, path in models:
        for pooling in ("none", "mean_rows"):
            settings = PagesSettings(enabled=True, model_path=path, device=device, batch_size=args.batch_size,
                                     dtype="bfloat16" if device.startswith("cuda") and "real" in name else "float32",
                                     pooling=pooling, pool_factor=3, dpi=args.dpi)
            run = embed(settings, pngs)
            peak = f"{run['peak_gib']:.2f}" if run["peak_gib"] is not None else "-"
            for layout, size in bytes_per_page(run["vectors"], tmp).items():
                lines.append(f"| {name} | {pooling} | {run['pages_per_s']:.1f} | {peak} | {run['tokens']:.0f} "
                             f"| {layout} | {size:,.0f} |")
    return lines + ["", "Delta Lake has no float16 type (delta-rs refuses Float16 columns), so the only "
                    "float16 layout the catalog can hold is the binary blob.", ""]


def _search_section(args, device: str) -> list[str]:
    lines = [f"MaxSim search over synthetic multivectors ({args.tokens_per_page} float16 tokens/page, dim 128, "
             f"20-token queries, shortlist 100):", "",
             "| pages | pooled first stage + exact MaxSim, ms/query | brute-force exact MaxSim on GPU, ms/query |",
             "| ---: | ---: | ---: |"]
    for pages in (int(p) for p in args.search_pages.split(",")):
        result = search_latency(pages, args.tokens_per_page, 128, 100, args.queries, device)
        brute = f"{result['brute_gpu_ms']:.2f}" if "brute_gpu_ms" in result else "- (no GPU)"
        lines.append(f"| {pages:,} | {result['shortlist_ms']:.2f} | {brute} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
