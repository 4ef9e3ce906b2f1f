"""Docling model parsing and VLM figure captioning on a GPU: throughput, latency, utilization.

    .venv/bin/python benchmarks/gpu_parse.py [--artifacts DIR] [--vlm-path DIR] [--vlm-backend transformers]
        [--device auto] [--batch-sizes 1,4,16,32] [--actors-per-gpu 1,2,4] [--pages 200] [--images 64]
        [--budget-s 450] [--out benchmarks/results/gpu_parse.md] [--tiny]

Sized for one call of at most 8 minutes on a lent H200. Corpus: the golden PDFs cycled to
``--pages`` pages. Docling sweep: for each actors-per-GPU count, that many spawned worker
processes each hold a ``DoclingPdfParser`` (``isolate=False``: the same code the isolated
child runs, without its pipe); for each layout (and table) batch size they load the models
(timed), parse one warm-up document, then pull documents from a shared queue. GPU
utilization and memory are sampled for the whole device (other processes' memory is
invisible to torch). ``pdf_text`` parses the same corpus in this process as a baseline.
Captions: one captioner, one warm-up batch and then ``--images`` figure crops per batch
size. ``--budget-s`` is a hard limit: the Docling sweep gets ``--docling-share`` of it,
cells share what is left, and whatever was measured when it runs out is written.
``--artifacts`` unset builds tiny random-weight models (plumbing only, not quality).
Writes ``--out`` and a JSON with the raw numbers beside it.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import platform
import queue
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers reads it too; workers inherit it
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np
from _gpu_monitor import GpuMonitor, gpu_description
from _parse_workers import WorkerPool

from kb_ray.config import CaptionSettings, DoclingPdfSettings

PDF = "application/pdf"
TINY = {"batch_sizes": "1,4", "actors_per_gpu": "1,2", "pages": 12, "images": 6, "device": "cpu",
        "budget_s": 80.0, "threads": 1, "max_new_tokens": 16}


def build_corpus(pages: int) -> tuple[list[str], list[int]]:
    """The golden PDFs, whole, cycled until they hold at least ``pages`` pages."""
    import pypdfium2

    sources = itertools.cycle([(str(path), len(pypdfium2.PdfDocument(path)))
                               for path in sorted((REPO / "golden" / "sources").glob("*.pdf"))])
    files, counts = [], []
    while sum(counts) < pages:
        path, count = next(sources)
        files.append(path)
        counts.append(count)
    return files, counts


def pdf_text_baseline(files: list[str], counts: list[int]) -> dict:
    from kb_ray.parsing.pdf_text import PdfTextParser

    parser, started = PdfTextParser(), time.perf_counter()
    failures = sum(parser.parse(Path(f).read_bytes(), mime=PDF, filename=Path(f).name).status != "ok" for f in files)
    seconds = time.perf_counter() - started
    return {"docs": len(files), "pages": sum(counts), "seconds": seconds, "pages_per_s": sum(counts) / seconds,
            "failures": failures}


def docling_settings(args, artifacts: str) -> dict:
    """Table structure on when its weights and package are there (real artifacts), else off."""
    from kb_ray.parsing.docling_pdf_pipeline import missing_models

    values = {"enabled": True, "artifacts_path": artifacts, "device": args.device, "num_threads": args.threads,
              "isolate": False, "do_table_structure": True}
    if missing_models(DoclingPdfSettings(**values)) is not None:
        values["do_table_structure"] = False
    problem = missing_models(DoclingPdfSettings(**values))
    if problem is not None:
        raise SystemExit(f"docling cannot run: {problem}")
    return values


def docling_sweep(args, values: dict, files: list[str], counts: list[int], *, deadline: float,
                  monitor: GpuMonitor) -> list[dict]:
    actors, batches = _ints(args.actors_per_gpu), _ints(args.batch_sizes)
    rows: list[dict] = []
    for n in actors:
        pool = None
        try:
            pool = WorkerPool(n, files, deadline=deadline)
            for b in batches:
                left = len(actors) * len(batches) - len(rows)
                soft = time.perf_counter() + (deadline - time.perf_counter()) / left
                cell = pool.run_cell({**values, "layout_batch_size": b, "table_batch_size": b}, counts,
                                     soft_deadline=soft, monitor=monitor)
                rows.append({"actors": n, "batch_size": b, "start_s": pool.start_s, **cell})
                print(f"docling actors={n} batch={b}: " + (cell.get("error") or
                      f"{cell['pages_per_s']:.2f} pages/s, load {cell['load_s_max']:.1f}s, "
                      f"{cell['failures']} failed{'' if cell['complete'] else ', cut by budget'}"), flush=True)
                if "error" in cell:
                    return rows
        except (queue.Empty, RuntimeError) as exc:
            reason = str(exc) or "the time budget ran out"
            rows.append({"actors": n, "batch_size": None, "error": reason})
            print(f"docling actors={n}: {reason}; sweep stopped", flush=True)
            if pool is not None:
                pool.close(kill=True)
                pool = None
            return rows
        finally:
            if pool is not None:
                pool.close()
    return rows


def caption_images(n: int) -> list[bytes]:
    """The golden figure crop (pdf_text) plus synthetic bar charts, ``n`` in all."""
    from kb_ray.parsing.pdf_text import PdfTextParser

    crops = list(PdfTextParser().parse((REPO / "golden" / "sources" / "figure.pdf").read_bytes(), mime=PDF).images.values())
    return (crops + [synthetic_chart(seed) for seed in range(max(0, n - len(crops)))])[:n]


def synthetic_chart(seed: int) -> bytes:
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    width, height = int(rng.integers(480, 900)), int(rng.integers(320, 640))
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    draw.text((20, 10), f"Figure {seed + 1}: pump throughput by quarter (m3/h)", fill="black")
    draw.line([(50, 30), (50, height - 40), (width - 20, height - 40)], fill="black")
    values = rng.uniform(0.1, 1.0, size=int(rng.integers(3, 9)))
    step = (width - 90) / len(values)
    for i, value in enumerate(values):
        x = 60 + i * step
        colour = tuple(int(c) for c in rng.integers(40, 200, 3))
        draw.rectangle([x, height - 40 - value * (height - 90), x + 0.7 * step, height - 40], fill=colour)
        draw.text((x, height - 32), f"Q{i + 1}", fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def caption_sweep(settings: CaptionSettings, images: list[bytes], batch_sizes: list[int], *, deadline: float,
                  monitor: GpuMonitor) -> tuple[float | None, list[dict]]:
    from kb_ray.enrich.captioners import build_captioner

    started = time.perf_counter()
    try:
        captioner = build_captioner(settings)
    except Exception as exc:  # noqa: BLE001 - e.g. vLLM not installed: report it, keep the Docling numbers
        return None, [{"error": f"{type(exc).__name__}: {exc}"[:300]}]
    load_s = time.perf_counter() - started
    captioner.settings = settings.model_copy(update={"batch_size": max(batch_sizes)})
    captioner.caption(images=images[:max(batch_sizes)])  # warm-up, once: one largest batch
    rows = []
    for i, size in enumerate(batch_sizes):
        if time.perf_counter() >= deadline:
            rows.append({"batch_size": size, "error": "skipped: the time budget ran out"})
            continue
        captioner.settings = settings.model_copy(update={"batch_size": size})  # read per call: one model load
        soft = time.perf_counter() + (deadline - time.perf_counter()) / (len(batch_sizes) - i)
        results, begun = [], time.perf_counter()
        for start in range(0, len(images), size):
            if results and time.perf_counter() >= soft:
                break
            results += captioner.caption(images=images[start:start + size])
        rows.append(caption_stats(size, results, time.perf_counter() - begun, len(images),
                                  monitor.window(begun, time.perf_counter())))
        print(f"captions batch={size}: {rows[-1]['captions_per_s']:.2f} captions/s, "
              f"{rows[-1]['errors']} errors", flush=True)
    captioner.close()
    return load_s, rows


def caption_stats(size: int, results: list, seconds: float, requested: int, gpu: dict) -> dict:
    errors = [r.error for r in results if not r.ok]
    return {"batch_size": size, "images": len(results), "requested": requested, "seconds": seconds,
            "captions_per_s": len(results) / seconds,
            "prompt_tok_per_s": sum(r.prompt_tokens or 0 for r in results) / seconds,
            "completion_tok_per_s": sum(r.completion_tokens or 0 for r in results) / seconds,
            "mean_s_per_caption": float(np.mean([r.seconds for r in results])), "errors": len(errors),
            "first_error": errors[0] if errors else None, "complete": len(results) == requested, **gpu}


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _f(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", default=None, help="Docling weights folder; unset: tiny random weights")
    parser.add_argument("--vlm-path", default=None, help="VLM weights folder; unset: the tiny random VLM")
    parser.add_argument("--vlm-backend", choices=("transformers", "vllm"), default="transformers")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--batch-sizes", default="1,4,16,32", help="Docling layout/table and caption batch sizes")
    parser.add_argument("--actors-per-gpu", default="1,2,4", help="Docling worker processes sharing the GPU")
    parser.add_argument("--pages", type=int, default=200, help="corpus size in pages (whole golden PDFs)")
    parser.add_argument("--images", type=int, default=64, help="figure crops to caption per batch size")
    parser.add_argument("--threads", type=int, default=4, help="CPU threads per Docling worker")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--budget-s", type=float, default=450.0, help="hard limit for the whole run")
    parser.add_argument("--docling-share", type=float, default=0.6, help="share of the budget for the Docling sweep")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "gpu_parse.md"))
    parser.add_argument("--tiny", action="store_true", help="tiny models, small sweep, CPU: a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    return parser.parse_args(argv)


def machine(args, tiny_docling: bool, tiny_vlm: bool) -> dict:
    from importlib import metadata

    import torch

    return {"date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC", "platform": platform.platform(),
            "cpus": os.cpu_count(), "gpu": gpu_description() if args.device == "cuda" else None,
            "device": args.device, "torch": torch.__version__, "docling": metadata.version("docling-slim"),
            "transformers": metadata.version("transformers"),
            "docling_weights": "tiny random weights" if tiny_docling else f"real: {args.artifacts}",
            "vlm": "tiny random Qwen2-VL (transformers)" if tiny_vlm else f"real: {args.vlm_path} ({args.vlm_backend})",
            "command": "python benchmarks/gpu_parse.py " + " ".join(sys.argv[1:])}


def report(data: dict) -> list[str]:
    m, smoke = data["machine"], data["machine"]["device"] != "cuda"
    title = ("# GPU parse benchmark — CPU smoke run with tiny random weights (NOT a GPU measurement)" if smoke
             else "# Docling model parsing and VLM captioning on a GPU")
    tables = "on" if data["docling_settings"]["do_table_structure"] else "off"
    base = data["pdf_text"]
    lines = [title, "",
             (f"{m['date']}, {m['platform']}, {m['cpus']} CPUs, torch {m['torch']}, docling {m['docling']}, "
              f"transformers {m['transformers']}."),
             (f"Device: {m['gpu'] or 'CPU'}. Docling weights: {m['docling_weights']} (table structure {tables}, "
              f"OCR off). VLM: {m['vlm']}."),
             f"Command: `{m['command']}`", "",
             (f"Corpus: {base['docs']} golden PDFs (cycled), {base['pages']} pages. pdf_text baseline (one process, "
              f"one thread): {base['pages_per_s']:.1f} pages/s, {base['failures']} failed."), ""]
    lines += _docling_table(data["docling"], base["pages_per_s"]) + [""]
    lines += [(f"Captions ({data['caption_images']} images: the golden figure crop and synthetic bar charts; "
               f"model load {_f(data['caption_load_s'], '.1f')} s, one warm-up batch of the largest size before the sweep):"), ""]
    lines += _caption_table(data["captions"]) + [""]
    lines.append(f"Ran {data['seconds']:.0f} s of a {data['budget_s']:.0f} s budget. GPU figures sample the whole "
                 f"device ({data['gpu_monitor'] or 'not available: no GPU'}); memory peaks include model loading "
                 "and, for actors > 1, every worker. `cut`: the cell's share of the budget ran out and only the "
                 "documents handed out by then count.")
    if smoke:
        lines.append("Tiny random weights on CPU exercise the plumbing only: these numbers say nothing about a GPU.")
    return lines


def _docling_table(rows: list[dict], baseline: float) -> list[str]:
    lines = [("| actors | batch | spawn+import s | model load s | pages | pages/s | docs/s | vs pdf_text "
              "| page ms p50 | page ms p95 | failed | GPU util % mean | GPU util % p95 | GPU mem peak MiB | complete |"),
             "|" + " ---: |" * 14 + " --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['actors']} | {_f(r['batch_size'], 'd')} | {r['error']} |")
            continue
        lines.append(
            f"| {r['actors']} | {r['batch_size']} | {r['start_s']:.1f} | {r['load_s_max']:.1f} | {r['pages']} "
            f"| {r['pages_per_s']:.2f} | {r['docs_per_s']:.2f} | {r['pages_per_s'] / baseline:.3f} "
            f"| {r['page_ms_p50']:.0f} | {r['page_ms_p95']:.0f} | {r['failures']} | {_f(r['gpu_util_mean'], '.0f')} "
            f"| {_f(r['gpu_util_p95'], '.0f')} | {_f(r['gpu_mem_peak_mib'], '.0f')} "
            f"| {'yes' if r['complete'] else 'cut'} |")
    return lines


def _caption_table(rows: list[dict]) -> list[str]:
    lines = [("| batch | captions | captions/s | prompt tok/s | completion tok/s | mean s/caption | errors "
              "| GPU util % mean | GPU mem peak MiB |"), "|" + " ---: |" * 9]
    for r in rows:
        if "error" in r:
            lines.append(f"| {_f(r.get('batch_size'), 'd')} | {r['error']} |")
            continue
        lines.append(
            f"| {r['batch_size']} | {r['images']}/{r['requested']} | {r['captions_per_s']:.2f} "
            f"| {r['prompt_tok_per_s']:.0f} | {r['completion_tok_per_s']:.0f} | {r['mean_s_per_caption']:.3f} "
            f"| {r['errors']} | {_f(r['gpu_util_mean'], '.0f')} | {_f(r['gpu_mem_peak_mib'], '.0f')} |")
    return lines


def write(data: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(report(data)) + "\n", encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began, data = time.perf_counter(), {"budget_s": args.budget_s}
    import torch

    args.device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    with tempfile.TemporaryDirectory() as tmp, GpuMonitor(enabled=args.device == "cuda") as monitor:
        from kb_ray.enrich.tiny_vlm import build_tiny_vlm
        from kb_ray.parsing.docling_tiny import build_tiny_docling_artifacts

        artifacts = args.artifacts or build_tiny_docling_artifacts(Path(tmp) / "docling")
        vlm_path = args.vlm_path or build_tiny_vlm(Path(tmp) / "vlm")
        data["machine"] = machine(args, tiny_docling=not args.artifacts, tiny_vlm=not args.vlm_path)
        files, counts = build_corpus(args.pages)
        data["pdf_text"] = pdf_text_baseline(files, counts)
        print(f"corpus: {len(files)} PDFs, {sum(counts)} pages; pdf_text {data['pdf_text']['pages_per_s']:.1f} pages/s; "
              f"device {args.device}, docling weights: {data['machine']['docling_weights']}", flush=True)
        data["docling_settings"] = docling_settings(args, artifacts)
        data["docling"] = docling_sweep(args, data["docling_settings"], files, counts, monitor=monitor,
                                        deadline=began + args.budget_s * args.docling_share)
        data.update(captions=[], caption_load_s=None, caption_images=0, gpu_monitor=monitor.source,
                    seconds=time.perf_counter() - began)
        write(data, Path(args.out))  # the Docling numbers survive a kill during VLM loading
        images = caption_images(args.images)
        real_cuda = args.device == "cuda" and args.vlm_path
        settings = CaptionSettings(enabled=True, backend=args.vlm_backend if args.vlm_path else "transformers",
                                   model_path=vlm_path, model_id=Path(vlm_path).name, device=args.device,
                                   dtype="bfloat16" if real_cuda else "float32", max_new_tokens=args.max_new_tokens,
                                   timeout_s=300)
        data["caption_images"] = len(images)
        data["caption_load_s"], data["captions"] = caption_sweep(settings, images, _ints(args.batch_sizes),
                                                                 deadline=began + args.budget_s - 5, monitor=monitor)
        data["gpu_monitor"] = monitor.source
    data["seconds"] = time.perf_counter() - began
    write(data, Path(args.out))
    print("\n".join(report(data)), flush=True)
    print(f"wrote {args.out} and {Path(args.out).with_suffix('.json')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
