"""Ingest throughput on a synthetic corpus: full ingest, unchanged re-ingest, embedding alone.

    .venv/bin/python benchmarks/ingest.py [--n 1000] [--pdf-share 0.5] [--workdir benchmarks/work]

Writes benchmarks/results/ingest.md. The corpus is generated (seeded) text and born-digital
PDFs of 1-3 pages; everything runs on the embedded default (local Ray, Delta on disk, CPU).
"""

from __future__ import annotations

import argparse
import platform
import random
import resource
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = ("pump valve pressure flow sensor motor seal bearing impeller outlet inlet filter screen housing "
         "torque voltage current winding thermal relay fuse cable gasket flange coupling shaft rotor stator "
         "maintenance inspection schedule warranty operator manual procedure safety lockout isolation drain "
         "storage freezing corrosion coating alloy steel bronze rubber polymer capacity rated nominal maximum "
         "minimum weekly monthly annual hours cycles litres bar kilowatt degrees celsius").split()


def sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(8, 22))
    return " ".join(words).capitalize() + f" {rng.randint(1, 9999)}."


def paragraph(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(3, 7)))


def write_text(path: Path, rng: random.Random) -> None:
    sections = [f"Section {i + 1}\n\n" + "\n\n".join(paragraph(rng) for _ in range(rng.randint(1, 3)))
                for i in range(rng.randint(2, 4))]
    path.write_text("\n\n".join(sections), encoding="utf-8")


def write_pdf(path: Path, rng: random.Random) -> int:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()
    story, pages = [], rng.randint(1, 3)
    for page in range(pages):
        story.append(Paragraph(f"{page + 1}. Chapter {rng.randint(1, 99)}", styles["Heading1"]))
        story += [Paragraph(paragraph(rng), styles["BodyText"]) for _ in range(rng.randint(2, 4))]
        story.append(PageBreak())
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1).build(story)
    return pages


def make_corpus(folder: Path, n: int, pdf_share: float, seed: int = 7) -> dict[str, int]:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    stats = {"pdf": 0, "text": 0, "pdf_pages": 0}
    for i in range(n):
        if rng.random() < pdf_share:
            stats["pdf_pages"] += write_pdf(folder / f"doc_{i:05d}.pdf", rng)
            stats["pdf"] += 1
        else:
            write_text(folder / f"doc_{i:05d}.txt", rng)
            stats["text"] += 1
    return stats


def embedding_alone(kb_root: str, threads: int | None) -> tuple[int, float]:
    """Embed every chunk of the catalog again, in one process, with the same settings."""
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.config import EmbeddingSettings
    from kb_ray.embedding.text import TextEmbedder

    chunks = DeltaCatalog.open(kb_root, create=False).read("chunks", columns=["text", "heading_path"])
    embedder = TextEmbedder.from_settings(EmbeddingSettings(), num_threads=threads)
    texts = [embedder.format_embed_text(text=t, heading_path=h or [])
             for t, h in zip(chunks.column("text").to_pylist(), chunks.column("heading_path").to_pylist())]
    started = time.perf_counter()
    embedder.embed_texts(texts)
    return len(texts), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--pdf-share", type=float, default=0.5)
    parser.add_argument("--workdir", default=str(ROOT / "benchmarks" / "work"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config overrides for the runs (e.g. embedding.num_threads=2)")
    args = parser.parse_args()

    from kb_ray.config import load_config
    from kb_ray.ingest.run import run_ingest

    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    corpus = make_corpus(work / "corpus", args.n, args.pdf_share)
    config = load_config(ROOT / "conf" / "local.yaml", overrides=[
        f"kb_root={work / 'kb'}", f"ingest.sources=[{work / 'corpus'}]", "ingest.micro_batch_docs=64",
        *args.overrides])
    full = run_ingest(config)
    again = run_ingest(config)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the driver, before the next step
    n_chunks, embed_seconds = embedding_alone(config.kb_root, config.embedding.num_threads)
    write_report(args, corpus, full, again, n_chunks, embed_seconds, peak_rss_mb)


def write_report(args, corpus, full, again, n_chunks, embed_seconds, peak_rss_mb) -> None:
    import os

    pages = full.pages
    rows = [
        ("documents", f"{args.n} ({corpus['pdf']} PDF with {corpus['pdf_pages']} pages, {corpus['text']} text)"),
        ("full ingest wall time", f"{full.seconds:.1f} s"),
        ("docs/s", f"{args.n / full.seconds:.2f}"),
        ("chunks/s", f"{full.chunks['new'] / full.seconds:.2f} ({full.chunks['new']} chunks)"),
        ("pages/s (PDF pages)", f"{pages / full.seconds:.2f}"),
        ("unchanged re-ingest", f"{again.seconds:.1f} s = {100 * again.seconds / full.seconds:.1f} % of full "
                                f"(parses {again.parses}, embeddings computed {again.embeddings['computed']})"),
        ("embedding stage alone", f"{n_chunks / embed_seconds:.2f} chunks/s ({embed_seconds:.1f} s, same threads)"),
        ("pipeline / embedding-alone throughput", f"{(full.chunks['new'] / full.seconds) / (n_chunks / embed_seconds):.2f}"),
        ("peak driver RSS", f"{peak_rss_mb:.0f} MiB"),
    ]
    table = "\n".join(["| measure | value |", "| --- | --- |"] + [f"| {k} | {v} |" for k, v in rows])
    text = (f"# Ingest benchmark\n\n{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, embedded default (conf/local.yaml, micro-batch 64)\n\n"
            f"Command: `.venv/bin/python benchmarks/ingest.py --n {args.n} --pdf-share {args.pdf_share}"
            f"{''.join(' --set ' + o for o in args.overrides)}`\n\n{table}\n")
    out = ROOT / "benchmarks" / "results" / "ingest.md"
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
