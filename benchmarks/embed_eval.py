"""Golden retrieval quality for each embedding runtime, with the ingest run in-process.

For each runtime: a fresh catalog, the real ingest (plan, ParseStage, EmbedWriteStage,
micro-batch commits: ``kb_ray.ingest.run.run_ingest``) with the two stages called directly
instead of as Ray actor pools (the stages are Ray-free; on a small shared machine Ray's
start-up alone can time out), then ``build-index`` and the eval harness on
``golden/queries.jsonl``. Prints Recall@5 and MRR per runtime and mode.

    python benchmarks/embed_eval.py --work /tmp/embed_eval torch onnx onnx-int8
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]


def in_process_dataset(todo: pa.Table, *, config, run_id: str):
    from kb_ray.ingest.stages import EmbedWriteStage, ParseStage

    storage = {"kb_root": config.kb_root, "storage_options": config.storage_options}
    parse = ParseStage(**storage, parse=config.parse, chunking=config.chunking, captions=config.enrich.captions,
                       run_id=run_id, keep_raw_for_pages=False)
    embed = EmbedWriteStage(**storage, embedding=config.embedding)
    micro = config.ingest.micro_batch_docs
    parsed = pa.concat_tables([parse(todo.slice(i, config.ray.parse.batch_size))
                               for i in range(0, todo.num_rows, config.ray.parse.batch_size)])
    return _Rows([embed(parsed.slice(i, micro)) for i in range(0, parsed.num_rows, micro)])


class _Rows:
    def __init__(self, tables: list[pa.Table]) -> None:
        self.tables = tables

    def iter_rows(self):
        for table in self.tables:
            yield from table.to_pylist()


def evaluate(runtime: str, work: Path, cache_dir: str | None) -> dict:
    import kb_ray.ingest.pipeline as pipeline
    from kb_ray.config import load_config
    from kb_ray.eval.dataset import load_dataset
    from kb_ray.eval.runner import run_eval
    from kb_ray.index import build_index
    from kb_ray.ingest.run import run_ingest

    root = work / runtime
    shutil.rmtree(root, ignore_errors=True)
    overrides = [f"kb_root={root}", f"embedding.runtime={runtime}"] + ([f"embedding.cache_dir={cache_dir}"] if cache_dir else [])
    config = load_config(REPO / "conf" / "local.yaml", overrides=overrides)
    pipeline.start_ray = lambda config: False
    pipeline.build_ingest_dataset = in_process_dataset
    started = time.perf_counter()
    run_ingest(config)
    build_index(config)
    result = run_eval(config, load_dataset(REPO / "golden" / "queries.jsonl"), modes=("dense", "hybrid"), k=20)
    out = {"runtime": runtime, "seconds": round(time.perf_counter() - started, 1)}
    for mode in result.modes:
        answerable = [q for q in mode.queries if q.answerable]
        for measure in ("recall@5", "mrr"):
            values = [q.metrics[measure] for q in answerable if measure in q.metrics]
            out[f"{mode.mode} {measure}"] = round(sum(values) / max(len(values), 1), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runtimes", nargs="+")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kb_embed_eval"))
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()
    for runtime in args.runtimes:
        print(json.dumps(evaluate(runtime, args.work, args.cache_dir)), flush=True)


if __name__ == "__main__":
    main()
