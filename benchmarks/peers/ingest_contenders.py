"""The contenders of ``ingest_shape.py``; each runs alone in a fresh process and reports
``pipeline_s`` (from just before its engine starts to the last row written), pages and chunks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import shape
from harness import KB_SET_ENV, ROOT, report_result

EMBED_BATCH = 32  # texts per forward pass for every contender (kb-ray's embedding.batch_size)


PEER_WINDOWS = ["chunking.strategy=recursive", "chunking.chunk_chars=2048", "chunking.overlap=200"]


def kb_ray(corpus: Path, out: Path) -> None:
    """kb-ray's ingest in the peers' window shape (layout analysis → 2,048/200 windows → embed → Delta)."""
    _kb_ray_ingest(corpus, out, PEER_WINDOWS)


def kb_ray_default(corpus: Path, out: Path) -> None:
    """kb-ray's ingest as a user gets it: conf/local.yaml (structural chunks, every character embedded)."""
    _kb_ray_ingest(corpus, out, [])


def _kb_ray_ingest(corpus: Path, out: Path, overrides: list[str]) -> None:
    from kb_ray.ingest.run import run_ingest

    config = _kb_ray_config(f"kb_root={out / 'kb'}", f"ingest.sources=[{corpus}]", *overrides)
    started = time.perf_counter()
    report = run_ingest(config)
    elapsed = time.perf_counter() - started
    assert report.status == "succeeded", report.render()
    report_result(pipeline_s=elapsed, pages=report.pages, chunks=report.chunks["new"],
                  torch_threads=config.embedding.num_threads,
                  documents=report.documents["new"])


class _RayEmbedder:
    def __init__(self) -> None:
        self.model = shape.load_model(num_threads=1)

    def __call__(self, batch: dict) -> dict:
        batch["embedding"] = list(self.model.encode(list(batch["chunk"]), batch_size=EMBED_BATCH))
        return batch


def _ray_pages(batch: dict) -> dict:
    rows: dict[str, list] = {"path": [], "page_number": [], "page_text": []}
    for path, data in zip(batch["path"], batch["bytes"]):
        for number, text in enumerate(shape.page_texts(data)):
            rows["path"].append(path)
            rows["page_number"].append(number)
            rows["page_text"].append(text)
    return rows


def _ray_chunks(row: dict) -> list[dict]:
    return [{"path": row["path"], "page_number": row["page_number"], "chunk_id": i, "chunk": chunk}
            for i, chunk in enumerate(shape.split_text(row["page_text"]))]


def ray_data(corpus: Path, out: Path) -> None:
    """A plain Ray Data script of the same shape, resources as kb-ray's defaults."""
    import pyarrow.parquet as pq
    import ray
    from ray.data import ActorPoolStrategy

    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING",
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}})
    ds = ray.data.read_binary_files(str(corpus), include_paths=True, file_extensions=["pdf"])
    ds = ds.map_batches(_ray_pages, batch_size=4)
    ds = ds.flat_map(_ray_chunks)
    ds = ds.map_batches(_RayEmbedder, compute=ActorPoolStrategy(size=1), num_cpus=0.5, batch_size=64)
    ds.write_parquet(str(out / "parquet"))
    elapsed = time.perf_counter() - started
    table = pq.read_table(out / "parquet", columns=["path", "page_number"])
    pages = len(set(zip(table.column("path").to_pylist(), table.column("page_number").to_pylist())))
    ray.shutdown()
    report_result(pipeline_s=elapsed, pages=pages, chunks=table.num_rows, torch_threads=1)


def daft_pipeline(corpus: Path, out: Path) -> None:
    """Daft (native runner) with its documented APIs and its default UDF settings."""
    import daft
    import pyarrow.parquet as pq
    from daft import DataType, col

    page_type = DataType.list(DataType.struct({"page_text": DataType.string(), "page_number": DataType.int64()}))
    chunk_type = DataType.list(DataType.struct({"chunk": DataType.string(), "chunk_id": DataType.int64()}))

    @daft.func(return_dtype=page_type)
    def pdf_pages(data: bytes):
        return [{"page_text": t, "page_number": n} for n, t in enumerate(shape.page_texts(data))]

    @daft.func(return_dtype=chunk_type)
    def chunks_of(text: str):
        return [{"chunk": c, "chunk_id": i} for i, c in enumerate(shape.split_text(text))]

    @daft.cls  # defaults: max_concurrency=None, use_process=None (Daft chooses)
    class Embedder:
        def __init__(self) -> None:
            import torch

            self.model = shape.load_model(num_threads=None)  # torch's default thread count
            self.threads = torch.get_num_threads()

        @daft.method.batch(return_dtype=DataType.fixed_size_list(DataType.float32(), shape.EMBED_DIM))
        def __call__(self, texts):
            return self.model.encode(texts.to_pylist(), batch_size=EMBED_BATCH)

    started = time.perf_counter()
    df = daft.from_glob_path(f"{corpus}/*.pdf")
    df = df.with_column("pages", pdf_pages(col("path").download())).explode("pages")
    df = df.with_columns({"page_text": col("pages")["page_text"], "page_number": col("pages")["page_number"]})
    df = df.with_column("chunks", chunks_of(col("page_text"))).explode("chunks")
    df = df.with_columns({"chunk": col("chunks")["chunk"], "chunk_id": col("chunks")["chunk_id"]})
    df = df.where(col("chunk").not_null())
    df = df.with_column("embedding", Embedder()(col("chunk")))
    df.select("path", "page_number", "chunk_id", "chunk", "embedding").write_parquet(str(out / "parquet"))
    elapsed = time.perf_counter() - started
    table = pq.read_table(out / "parquet", columns=["path", "page_number"])
    pages = len(set(zip(table.column("path").to_pylist(), table.column("page_number").to_pylist())))
    import torch

    report_result(pipeline_s=elapsed, pages=pages, chunks=table.num_rows,
                  torch_threads=f"torch default ({torch.get_num_threads()})")


def embed_alone(corpus: Path, threads: int) -> None:
    """The embedding stage alone: the peers' chunks (extracted untimed), one process."""
    texts, pages = [], 0
    for pdf in sorted(corpus.glob("*.pdf")):
        for text in shape.page_texts(pdf.read_bytes()):
            pages += 1
            texts += shape.split_text(text)
    model = shape.load_model(num_threads=threads)
    model.encode(texts[:EMBED_BATCH], batch_size=EMBED_BATCH)  # warm-up, untimed
    started = time.perf_counter()
    model.encode(texts, batch_size=EMBED_BATCH)
    report_result(pipeline_s=time.perf_counter() - started, pages=pages, chunks=len(texts), torch_threads=threads)


def sequential(corpus: Path, out: Path) -> None:
    """A plain sequential Python script: pypdfium2 → 2,048/200 windows → MiniLM (1 thread) → Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    started = time.perf_counter()
    model = shape.load_model(num_threads=1)
    rows: dict[str, list] = {"path": [], "page_number": [], "chunk": []}
    for pdf in sorted(corpus.glob("*.pdf")):
        for number, text in enumerate(shape.page_texts(pdf.read_bytes())):
            for chunk in shape.split_text(text):
                rows["path"].append(str(pdf))
                rows["page_number"].append(number)
                rows["chunk"].append(chunk)
    vectors = model.encode(rows["chunk"], batch_size=EMBED_BATCH)
    table = pa.table({**rows, "embedding": pa.array(list(vectors), pa.list_(pa.float32()))})
    pq.write_table(table, out / "chunks.parquet")
    elapsed = time.perf_counter() - started
    pages = len(set(zip(rows["path"], rows["page_number"])))
    report_result(pipeline_s=elapsed, pages=pages, chunks=table.num_rows, torch_threads=1)


def kb_ray_embed_alone(corpus: Path, out: Path) -> None:
    """kb-ray's own embedding stage alone on its default chunks (parsed and chunked untimed),
    with the configured embedder (runtime, threads and batch size of conf/local.yaml): each chunk's
    text and its passages (``index.passage_chars``, kb_ray/index/passages.py), as the ingest embeds them."""
    from kb_ray.index.passages import passage_texts_by_sha
    from kb_ray.processing import DocumentProcessor

    config = _kb_ray_config()
    processor = DocumentProcessor(parse=config.parse, chunking=config.chunking, captions=config.enrich.captions)
    embedder = _configured_embedder(config.embedding)
    texts, pages, passages = [], 0, {}
    for pdf in sorted(corpus.glob("*.pdf")):
        version = processor.process(pdf.read_bytes(), collection="bench", key=str(pdf), filename=pdf.name)
        pages += len(version.pages)
        texts += [embedder.format_embed_text(text=vc.chunk.text, heading_path=vc.chunk.heading_path)
                  for vc in version.chunks]
        passages.update(passage_texts_by_sha([vc.chunk.text for vc in version.chunks],
                                             [vc.chunk.heading_path for vc in version.chunks],
                                             max_chars=config.index.passage_chars))
    embedder.embed_texts(texts[:EMBED_BATCH])  # warm-up, untimed
    started = time.perf_counter()
    embedder.embed_texts(texts + list(passages.values()))
    report_result(pipeline_s=time.perf_counter() - started, pages=pages, chunks=len(texts),
                  torch_threads=config.embedding.num_threads, passage_texts=len(passages))


def _kb_ray_config(*overrides: str):
    """conf/local.yaml with ``overrides``, then the ``ingest_shape.py --kb-set`` ones."""
    from kb_ray.config import load_config

    extra = [line for line in os.environ.get(KB_SET_ENV, "").splitlines() if line]
    return load_config(ROOT / "conf" / "local.yaml", overrides=[*overrides, *extra])


def _configured_embedder(settings):
    from kb_ray.embedding.text import TextEmbedder

    return TextEmbedder.from_settings(settings)


CONTENDERS = {
    "kb-ray-default": kb_ray_default,
    "kb-ray": kb_ray,
    "kb-embed": kb_ray_embed_alone,
    "sequential": sequential,
    "ray-data": ray_data,
    "daft": daft_pipeline,
    "embed-1t": lambda corpus, out: embed_alone(corpus, 1),
    "embed-2t": lambda corpus, out: embed_alone(corpus, 2),
}
