"""Golden retrieval quality for each embedding runtime.

For each runtime: a fresh catalog, the real ingest (``kb_ray.ingest.run.run_ingest`` on local
Ray), then ``build-index`` and the eval harness on ``golden/queries.jsonl``. Prints Recall@5
and MRR per runtime and mode. (The figures in benchmarks/results/embed.md came from an
earlier revision that called the two ingest stages in-process; the stages are the same code.)

    python benchmarks/embed_eval.py --work /tmp/embed_eval torch onnx onnx-int8
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def evaluate(runtime: str, work: Path, cache_dir: str | None) -> dict:
    from kb_ray.config import load_config
    from kb_ray.eval.dataset import load_dataset
    from kb_ray.eval.runner import run_eval
    from kb_ray.index import build_index
    from kb_ray.ingest.run import run_ingest

    root = work / runtime
    shutil.rmtree(root, ignore_errors=True)
    overrides = [f"kb_root={root}", f"embedding.runtime={runtime}"] + ([f"embedding.cache_dir={cache_dir}"] if cache_dir else [])
    config = load_config(REPO / "conf" / "local.yaml", overrides=overrides)
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
