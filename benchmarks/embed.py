"""Text-embedding runtimes on CPU: torch vs ONNX Runtime fp32 vs ONNX Runtime int8.

Real chunk texts: the golden sources, this repository's docs and the package descriptions
(``*.dist-info/METADATA``) of the installed environment, parsed and chunked by kb-ray's own
structural chunker (``ChunkingSettings()``: 200-token budget), embedded as the ingest embeds
them (heading path + text). Two throughput sets: the long chunks (>= 120 words, what full
sections become) and short ones (< 30 words: list items, headings, queries).

1. Vector agreement against torch fp32 (the reference every catalog was built with):
   max / p99 / mean of ``|cos - 1|`` over all texts, for torch itself in another batch
   composition (the noise floor), onnx fp32, onnx int8 and torch fp16 (on a subset: CPU
   half kernels are slow). These figures set the fingerprint tolerance
   (``kb_ray/embedding/fingerprint.py``).
2. Throughput (chunks/s) at 1 and 2 threads, runtimes interleaved round by round so load on
   the (shared) machine hits all alike; best of ``--repeats`` rounds.

    python benchmarks/embed.py --n 3000 --corpus-cache /tmp/embed_corpus.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from kb_ray.embedding import TextEmbedder  # noqa: E402
from kb_ray.embedding.text import format_embed_text  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "embed.md"
RUNTIMES = ("torch", "onnx", "onnx-int8")


def real_chunks(n: int) -> list[str]:
    """Up to ``n`` embed texts of real documents, chunked by the structural chunker."""
    from kb_ray.processing import DocumentProcessor

    processor = DocumentProcessor()
    files = sorted(glob.glob(str(REPO / "golden" / "sources" / "*"))) + sorted(glob.glob(str(REPO / "docs" / "*.md")))
    files += sorted(glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "*.dist-info", "METADATA")))
    texts: list[str] = []
    for file in files:
        name = Path(file).parent.name + ".md" if file.endswith("METADATA") else Path(file).name
        version = processor.process(Path(file).read_bytes(), collection="bench", key=name, filename=name)
        texts += [format_embed_text(text=c.text, heading_path=c.chunk.heading_path) for c in version.chunks]
        if len(texts) >= n:
            break
    return texts[:n]


def load_corpus(args: argparse.Namespace) -> list[str]:
    if args.corpus_cache and args.corpus_cache.is_file():
        return json.loads(args.corpus_cache.read_text())[: args.n]
    texts = real_chunks(args.n)
    if args.corpus_cache:
        args.corpus_cache.write_text(json.dumps(texts))
    return texts


def cosine_gaps(vectors: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    gaps = np.abs((vectors * reference).sum(axis=1) - 1.0)
    return {"max": float(gaps.max()), "p99": float(np.quantile(gaps, 0.99)), "mean": float(gaps.mean()),
            "texts": len(gaps)}


def agreement(texts: list[str], args: argparse.Namespace) -> dict[str, dict[str, float]]:
    torch_embedder = TextEmbedder(num_threads=2, batch_size=32)
    reference = torch_embedder.embed_texts(texts)
    torch_embedder.sort_by_length, torch_embedder.batch_size = False, 8  # other padding, same model
    out = {"torch (other batches)": cosine_gaps(torch_embedder.embed_texts(texts), reference)}
    for runtime in ("onnx", "onnx-int8"):
        embedder = TextEmbedder(runtime=runtime, num_threads=2, cache_dir=args.cache_dir)
        out[runtime] = cosine_gaps(embedder.embed_texts(texts), reference)
    half = TextEmbedder(precision="float16", num_threads=2, batch_size=32)
    subset = texts[:: max(1, len(texts) // args.fp16_n)][: args.fp16_n]
    out["torch fp16"] = cosine_gaps(half.embed_texts(subset), reference[:: max(1, len(texts) // args.fp16_n)][: args.fp16_n])
    return out


def throughput(texts_by_set: dict[str, list[str]], args: argparse.Namespace) -> list[dict]:
    import torch

    rows = []
    for threads in args.threads:
        embedders = {rt: TextEmbedder(runtime=rt, num_threads=threads, batch_size=args.batch_size,
                                      cache_dir=args.cache_dir) for rt in RUNTIMES}
        best = {(rt, name): 0.0 for rt in RUNTIMES for name in texts_by_set}
        for repeat in range(args.repeats):
            order = RUNTIMES[repeat % 3:] + RUNTIMES[: repeat % 3]  # rotate who goes first
            for runtime in order:
                torch.set_num_threads(threads)  # process-wide; the torch embedder set it at construction
                for name, texts in texts_by_set.items():
                    started = time.perf_counter()
                    embedders[runtime].embed_texts(texts)
                    rate = len(texts) / (time.perf_counter() - started)
                    best[(runtime, name)] = max(best[(runtime, name)], rate)
        for (runtime, name), rate in best.items():
            rows.append({"threads": threads, "runtime": runtime, "set": name, "rate": rate})
            print(f"threads={threads} {runtime:9s} {name}: {rate:.1f} chunks/s", flush=True)
    return rows


def tokenization_share(texts: list[str], args: argparse.Namespace) -> float:
    """Fraction of an onnx embed_texts call (1 thread) spent in the tokenizer."""
    embedder = TextEmbedder(runtime="onnx", num_threads=1, batch_size=args.batch_size, cache_dir=args.cache_dir)
    tokenizer = embedder._encoder.tokenizer
    started = time.perf_counter()
    for start in range(0, len(texts), args.batch_size):
        tokenizer.encode_batch(texts[start : start + args.batch_size])
    tokenize = time.perf_counter() - started
    started = time.perf_counter()
    embedder.embed_texts(texts)
    return tokenize / (time.perf_counter() - started)


def token_counts(texts: list[str]) -> np.ndarray:
    from kb_ray.embedding.model_files import default_model_path
    from kb_ray.embedding.onnx_runtime import load_fast_tokenizer

    tokenizer = load_fast_tokenizer(default_model_path(), max_length=256)
    return np.array([sum(e.attention_mask) for e in tokenizer.encode_batch(texts)])


def report(rows: list[dict], gaps: dict, sets: dict[str, list[str]], share: float, args) -> str:
    by = {(r["threads"], r["runtime"], r["set"]): r["rate"] for r in rows}
    lines = ["# Text embedding runtimes (CPU)", "",
             f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}; machine: {os.cpu_count()} CPUs, "
             f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, SHARED with other "
             "jobs (load average far above the core count): absolute rates are low and noisy, the ratios in one "
             "row hold because runtimes ran interleaved round by round",
             f"- model: packaged all-MiniLM-L6-v2; batch {args.batch_size} texts per forward pass, length-sorted; "
             f"best of {args.repeats} interleaved rounds", ""]
    for name, texts in sets.items():
        counts = token_counts(texts)
        lines.append(f"- set `{name}`: {len(texts)} real chunks, {counts.min()}-{counts.max()} tokens (mean {counts.mean():.0f})")
    lines += ["", "## Throughput (chunks/s)", "", "| threads | set | torch | onnx | onnx-int8 | onnx / torch | int8 / torch |",
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for threads in args.threads:
        for name in sets:
            t, o, q = (by[(threads, rt, name)] for rt in RUNTIMES)
            lines.append(f"| {threads} | {name} | {t:.1f} | {o:.1f} | {q:.1f} | {o / t:.2f} | {q / t:.2f} |")
    lines += ["", f"Tokenization (fast tokenizer, inline) is {share:.1%} of an onnx `embed_texts` call on the long "
              "set at 1 thread: not worth moving off the critical path.", "",
              "## Vector agreement with torch fp32", "", "`|cos(torch, other) - 1|` per text.", "",
              "| contender | texts | max | p99 | mean |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, g in gaps.items():
        lines.append(f"| {name} | {g['texts']} | {g['max']:.2e} | {g['p99']:.2e} | {g['mean']:.2e} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="real chunks for the agreement figures")
    parser.add_argument("--speed-n", type=int, default=192, help="chunks per throughput set")
    parser.add_argument("--fp16-n", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=None, help="ONNX export cache (default: the embedder's)")
    parser.add_argument("--corpus-cache", type=Path, default=None, help="JSON file to keep the parsed chunks in")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    texts = load_corpus(args)
    words = np.array([len(t.split()) for t in texts])
    sets = {"long (>= 120 words)": [t for t, w in zip(texts, words) if w >= 120][: args.speed_n],
            "short (< 30 words)": [t for t, w in zip(texts, words) if w < 30][: args.speed_n]}
    gaps = agreement(texts, args)
    print(json.dumps(gaps, indent=1), flush=True)
    rows = throughput(sets, args)
    text = report(rows, gaps, sets, tokenization_share(sets["long (>= 120 words)"], args), args)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
