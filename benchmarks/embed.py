"""CPU text-embedding throughput: document-order vs length-sorted batching.

Embeds N synthetic chunks (50-400 tokens, ~230 on average) with the packaged
all-MiniLM-L6-v2 through :class:`kb_ray.embedding.TextEmbedder`, for each torch thread
count and batch size, once in document order and once sorted by length. Runs of one
(threads, batch) cell are interleaved so machine drift hits both orders alike; the best of
``--repeats`` runs is kept. Prints a markdown table and writes
``benchmarks/results/embed.md``.

    python benchmarks/embed.py --n 256
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from kb_ray.embedding import TextEmbedder  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "embed.md"
WORDS = """
the of and to in is for on that with as by at from this are be or an it was which data
model index search query document table figure section page chunk vector embedding ray
delta lake catalog version citation source retrieval language network learning system
performance throughput latency memory storage cluster worker task actor pipeline stage
report analysis result method approach evaluation benchmark experiment training test
company revenue market customer product service quarter growth cost price policy risk
""".split()


def synthetic_chunks(n: int, *, seed: int = 0, low: int = 50, high: int = 400) -> list[str]:
    """``n`` pseudo-English texts whose token counts vary uniformly in ``[low, high]``."""
    rng = np.random.default_rng(seed)
    texts = []
    for length in rng.integers(low, high + 1, size=n):
        words = rng.choice(WORDS, size=int(length) - 2)  # all vocabulary words: 1 token each
        texts.append(" ".join(words) + " .")
    return texts


def throughput(embedder: TextEmbedder, texts: list[str], *, batch_size: int, sort: bool) -> float:
    embedder.batch_size = batch_size
    embedder.sort_by_length = sort
    start = time.perf_counter()
    embedder.embed_texts(texts)
    return len(texts) / (time.perf_counter() - start)


def measure(embedder: TextEmbedder, texts: list[str], args: argparse.Namespace) -> list[dict]:
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        embedder.embed_texts(texts[: args.batch_sizes[0]])  # warm-up at this thread count
        for batch_size in args.batch_sizes:
            best = {False: 0.0, True: 0.0}
            for repeat in range(args.repeats):
                for sort in (False, True) if repeat % 2 == 0 else (True, False):
                    best[sort] = max(best[sort], throughput(embedder, texts, batch_size=batch_size, sort=sort))
            for sort in (False, True):
                rows.append({"threads": threads, "batch": batch_size, "sorted": sort, "rate": best[sort]})
                print(f"threads={threads} batch={batch_size} sorted={sort}: {best[sort]:.1f} texts/s", flush=True)
    return rows


def markdown_table(rows: list[dict], tokens_per_text: float) -> str:
    baseline = next(r["rate"] for r in rows if not r["sorted"])  # first thread count, first batch, document order
    by_cell = {(r["threads"], r["batch"], r["sorted"]): r["rate"] for r in rows}
    lines = [
        "| threads | batch | order | texts/s | tokens/s | vs document order (same cell) | vs baseline |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        same_cell = by_cell[(r["threads"], r["batch"], False)]
        lines.append(
            f"| {r['threads']} | {r['batch']} | {'length-sorted' if r['sorted'] else 'document'} "
            f"| {r['rate']:.1f} | {r['rate'] * tokens_per_text:.0f} "
            f"| {r['rate'] / same_cell:.2f} | {r['rate'] / baseline:.2f} |"
        )
    return "\n".join(lines)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def onnx_note() -> str:
    import importlib.util

    missing = [m for m in ("onnxruntime", "optimum") if importlib.util.find_spec(m) is None]
    if missing:
        return f"ONNX Runtime variant skipped: {', '.join(missing)} not installed."
    return "ONNX Runtime variant not measured by this script yet."


def report(rows: list[dict], texts: list[str], embedder: TextEmbedder, args: argparse.Namespace) -> str:
    tokenizer = embedder._model.tokenizer
    counts = np.array([len(ids) for ids in tokenizer(texts, add_special_tokens=True, verbose=False)["input_ids"]])
    embedded = np.minimum(counts, embedder.max_seq_length)
    header = [
        "# Text embedding throughput (CPU)",
        "",
        f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {os.cpu_count()} CPUs (nproc), {cpu_name()}, Python {platform.python_version()}",
        f"- torch {torch.__version__}; model {embedder.model_id} (dim {embedder.dim}, "
        f"max_seq_length {embedder.max_seq_length})",
        f"- corpus: {len(texts)} synthetic chunks, {counts.min()}-{counts.max()} tokens "
        f"(mean {counts.mean():.0f}); {np.mean(counts > embedder.max_seq_length):.0%} truncated to "
        f"{embedder.max_seq_length}, so mean {embedded.mean():.0f} tokens embedded",
        f"- best of {args.repeats} run(s) per row, document/sorted runs interleaved; "
        "tokens/s counts embedded (post-truncation) tokens",
        f"- baseline: document order, {args.threads[0]} thread(s), batch {args.batch_sizes[0]}",
        f"- {onnx_note()}",
        "",
        "",
    ]
    return "\n".join(header) + markdown_table(rows, float(embedded.mean())) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="number of synthetic chunks")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    embedder = TextEmbedder()
    texts = synthetic_chunks(args.n)
    rows = measure(embedder, texts, args)
    text = report(rows, texts, embedder, args)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
