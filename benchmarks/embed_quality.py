"""Retrieval quality of int8 quantization recipes against torch fp32, on golden and realdocs.

Each contender embeds the chunk texts of an already-built catalog (the active versions'
chunks, embedded as the ingest embeds them: heading path + text, 32 per batch, length
sorted) and the queries one at a time (as the searcher does; dynamic int8 scales depend on
the batch). Dense retrieval is exact cosine over those vectors; gold quotes resolve to
relevant chunks with the harness's own code (``kb_ray.eval.resolve``) and Recall@5 / MRR
come from ``kb_ray.eval.metrics.ranking_metrics``, averaged over the answerable queries.
The catalogs are only read.

Contenders: ``torch`` (the reference), ``onnx`` (fp32) and the quantization recipes in
:data:`RECIPES` (ONNX Runtime ``quantize_dynamic`` of the fused fp32 graph). Vectors are
cached per contender and text set in ``--work``, so a run can add contenders to an earlier
one; every figure of one report compares vectors of the same texts.

    python benchmarks/embed_quality.py agree ffn-down-fp32 no-embed   # |cos - 1| screen, 300 realdocs chunks
    python benchmarks/embed_quality.py retrieval int8-all ffn-down-fp32 --stored-torch --pool 30   # R@5 / MRR
    python benchmarks/embed_quality.py speed onnx int8-all ffn-down-fp32   # chunks/s at 1 and 2 threads

The catalogs (``--golden-kb``, ``--realdocs-kb``) must have been ingested with the default
chunker; ``--stored-torch`` takes torch's chunk vectors from the catalog's ``embeddings``
table (the default torch fingerprint's), and ``--pool N`` ranks only the union of torch's top
N chunks per answerable query (exact for torch; a contender can then miss a chunk that
torch ranked below N for every query).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from kb_ray.embedding import TextEmbedder  # noqa: E402
from kb_ray.embedding.onnx_export import QUANT_RECIPES, QuantRecipe, quantize_graph  # noqa: E402
from kb_ray.embedding.text import format_embed_text  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FFN_DOWN = r"layer\.\d+/output/dense/MatMul$"  # each layer's FFN down projection (GELU output in)
ATTN_OUT = r"attention/output/dense/MatMul$"  # each layer's attention output projection
NO_EMBED = ("MatMul", "Attention")  # op types: the embedding tables (EmbedLayerNormalization) stay fp32
RECIPES = {
    "int8-all": QUANT_RECIPES["onnx-int8"],  # today's onnx-int8: every quantizable op, embeddings included
    "no-embed": QuantRecipe(op_types=NO_EMBED),
    "matmul-only": QuantRecipe(op_types=("MatMul",)),  # the fused QKV projections fp32 too
    "no-embed-reduce-range": QuantRecipe(op_types=NO_EMBED, reduce_range=True),
    "ffn-down-fp32": QUANT_RECIPES["onnx-int8-mixed"],  # the recipe of onnx-int8-mixed
    # the FFN down projections that the screen found sensitive (layers 0-2) fp32, the rest int8
    "ffn-down-fp32-layers012": QuantRecipe(op_types=NO_EMBED, keep_float=(r"layer\.[012]/output/dense/MatMul$",)),
    "attn-out-fp32": QuantRecipe(op_types=NO_EMBED, keep_float=(ATTN_OUT,)),
    "attn-out+ffn-down-fp32": QuantRecipe(op_types=NO_EMBED, keep_float=(ATTN_OUT, FFN_DOWN)),
    **{f"ffn-down-int8-layer{n}": QuantRecipe(op_types=NO_EMBED, keep_float=(  # only layer n's FFN down int8
        rf"layer\.[{''.join(str(m) for m in range(6) if m != n)}]/output/dense/MatMul$",)) for n in range(6)},
}
SETS = {"golden": (Path("/tmp/gold_now"), REPO / "golden" / "queries.jsonl"),
        "realdocs": (Path("/tmp/final_rd"), REPO / "benchmarks" / "realdocs" / "queries.jsonl")}


def corpus(root: Path) -> tuple[list[str], list[str]]:
    """Chunk ids and embed texts of the active versions' chunks of the catalog at ``root``."""
    from kb_ray.catalog.delta import DeltaCatalog

    catalog = DeltaCatalog(str(root))
    active = catalog.read("documents", columns=["active_version_id"], filter=pc.field("active_version_id").is_valid())
    members = catalog.read("version_chunks", columns=["chunk_id"],
                           filter=pc.field("version_id").isin(active.column("active_version_id")))
    wanted = sorted(set(members.column("chunk_id").to_pylist()))
    chunks = catalog.read("chunks", columns=["chunk_id", "text", "heading_path"], filter=pc.field("chunk_id").isin(wanted))
    rows = sorted(chunks.to_pylist(), key=lambda r: r["chunk_id"])
    return [r["chunk_id"] for r in rows], [format_embed_text(text=r["text"], heading_path=r["heading_path"] or [])
                                           for r in rows]


def qrels(root: Path, queries: list) -> dict[str, set[str]]:
    """Relevant chunk ids per answerable query, by the harness's resolver."""
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.eval.resolve import CanonicalTexts, chunk_spans, relevant_chunks, resolve_queries

    catalog = DeltaCatalog(str(root))
    resolution = resolve_queries(queries, CanonicalTexts(catalog))
    if resolution.unresolved:
        raise SystemExit(f"{root}: unresolved gold quotes: {resolution.unresolved[:3]}")
    chunks = chunk_spans(catalog, [g.version_id for spans in resolution.spans.values() for g in spans])
    return {q.id: relevant_chunks(resolution.spans[q.id], chunks) for q in queries if q.answerable}


def embedder(name: str, args: argparse.Namespace) -> TextEmbedder:
    if name in ("torch", "onnx", *QUANT_RECIPES):
        return TextEmbedder(runtime=name, num_threads=args.threads, cache_dir=args.cache_dir)
    from kb_ray.embedding.model_files import default_model_path, model_digest
    from kb_ray.embedding.onnx_export import exported_model

    base = TextEmbedder(runtime="onnx", num_threads=args.threads, cache_dir=args.cache_dir)
    variant = args.work / "graphs" / f"{name}.onnx"
    if not variant.is_file():
        variant.parent.mkdir(parents=True, exist_ok=True)
        path = default_model_path()
        fp32 = exported_model(path, digest=model_digest(path), runtime="onnx", cache_dir=args.cache_dir)
        quantize_graph(fp32, variant, recipe=RECIPES[name])
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
    base._encoder.session = ort.InferenceSession(str(variant), options, providers=["CPUExecutionProvider"])
    return base


def vectors(name: str, texts: list[str], args: argparse.Namespace, *, one_by_one: bool = False) -> np.ndarray:
    """``name``'s vectors of ``texts``, cached in ``--work`` by contender and text digest."""
    digest = hashlib.sha256(json.dumps([texts, one_by_one]).encode()).hexdigest()[:16]
    file = args.work / f"{name}-{digest}.npy"
    if file.is_file():
        return np.load(file)
    model, started = embedder(name, args), time.perf_counter()
    out = np.vstack([model.embed_texts([t]) for t in texts]) if one_by_one else model.embed_texts(texts)
    print(f"{name}: {len(texts)} texts in {time.perf_counter() - started:.0f} s", flush=True)
    np.save(file, out)
    return out


def gaps(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    gap = np.abs((a * b).sum(axis=1) - 1.0)
    return {"max": float(gap.max()), "p99": float(np.quantile(gap, 0.99)), "mean": float(gap.mean()), "n": len(gap)}


def retrieval_scores(chunk_vectors: np.ndarray, query_vectors: np.ndarray, chunk_ids: list[str], queries: list,
                     relevant: dict[str, set[str]], *, k: int = 20) -> dict[str, dict[str, float]]:
    """Per answerable query: the harness's ranking metrics of exact-cosine top-k."""
    from kb_ray.eval.metrics import RANKING_MEASURES, ranking_metrics

    scores = query_vectors @ chunk_vectors.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    run = {q.id: [chunk_ids[i] for i in row] for q, row in zip(queries, top) if q.answerable}
    per_query = ranking_metrics(relevant, run)
    return {qid: per_query.get(qid, dict.fromkeys(RANKING_MEASURES, 0.0)) for qid in relevant}


def agree(args: argparse.Namespace) -> None:
    """Screen: |cos - 1| against torch on a seeded sample of realdocs chunks and the dev queries."""
    from kb_ray.eval.dataset import load_dataset

    _, texts = corpus(SETS["realdocs"][0])
    sample = [texts[i] for i in sorted(np.random.default_rng(7).choice(len(texts), args.sample, replace=False))]
    dev = set(json.loads((REPO / "benchmarks" / "realdocs" / "queries.split.json").read_text())["dev"])
    queries = [q.query for q in load_dataset(SETS["realdocs"][1]) if q.id in dev]
    reference = vectors("torch", sample, args), vectors("torch", queries, args, one_by_one=True)
    print("| contender | chunks max | chunks mean | queries max | queries mean |\n| --- | ---: | ---: | ---: | ---: |")
    for name in args.contenders or ["onnx", *RECIPES]:
        c, q = gaps(vectors(name, sample, args), reference[0]), gaps(vectors(name, queries, args, one_by_one=True), reference[1])
        print(f"| {name} | {c['max']:.2e} | {c['mean']:.2e} | {q['max']:.2e} | {q['mean']:.2e} |", flush=True)


def stored_torch_vectors(root: Path, texts: list[str]) -> np.ndarray:
    """The catalog's own vectors of ``texts`` under the default (torch fp32) fingerprint."""
    from kb_ray import ids
    from kb_ray.catalog.delta import DeltaCatalog
    from kb_ray.config import EmbeddingSettings
    from kb_ray.embedding import embedder_fingerprint

    fingerprint = embedder_fingerprint(EmbeddingSettings(runtime="torch"))
    table = DeltaCatalog(str(root)).read("embeddings", columns=["embed_text_sha", "vector"],
                                         filter=pc.field("embedder_fp") == fingerprint)
    found = dict(zip(table.column("embed_text_sha").to_pylist(), table.column("vector").to_pylist()))
    return np.array([found[ids.sha256_text(t)] for t in texts], dtype=np.float32)


def candidate_pool(reference: np.ndarray, query_vectors: np.ndarray, queries: list, depth: int) -> list[int]:
    """Union over the answerable queries of torch's top ``depth`` chunks (indexes, sorted)."""
    rows = [i for i, q in enumerate(queries) if q.answerable]
    top = np.argsort(-(query_vectors[rows] @ reference.T), axis=1, kind="stable")[:, :depth]
    return sorted(set(top.reshape(-1).tolist()))


def evaluate_set(name: str, contenders: list[str], args: argparse.Namespace) -> dict[str, dict]:
    from kb_ray.eval.dataset import load_dataset

    root, query_file = SETS[name]
    chunk_ids, texts = corpus(root)
    queries = load_dataset(query_file)
    relevant = qrels(root, queries)
    parts = {"all": set(relevant)}
    if name == "realdocs":
        split = json.loads((REPO / "benchmarks" / "realdocs" / "queries.split.json").read_text())
        parts = {"dev": set(split["dev"]) & set(relevant), "test": set(split["test"]) & set(relevant), "all": set(relevant)}
    torch_queries = vectors("torch", [q.query for q in queries], args, one_by_one=True)
    reference = stored_torch_vectors(root, texts) if args.stored_torch else vectors("torch", texts, args)
    if args.pool:  # torch's ranking is exact on the pool (its top `pool` of every query are in it)
        keep = candidate_pool(reference, torch_queries, queries, args.pool)
        chunk_ids, texts, reference = [chunk_ids[i] for i in keep], [texts[i] for i in keep], reference[keep]
    out = {}
    for contender in contenders:
        chunk_vectors = reference if contender == "torch" else vectors(contender, texts, args)
        query_vectors = vectors(contender, [q.query for q in queries], args, one_by_one=True)
        per_query = retrieval_scores(chunk_vectors, query_vectors, chunk_ids, queries, relevant)
        out[contender] = {"chunks": len(texts), "cos_gap": gaps(chunk_vectors, reference),
                          "query_cos_gap": gaps(query_vectors, torch_queries),
                          "deepest_torch_rank_in_top20": deepest_rank(reference, torch_queries, chunk_vectors,
                                                                      query_vectors, queries), **{
            part: {m: float(np.mean([per_query[q][m] for q in ids])) for m in ("recall@5", "mrr")} | {"queries": len(ids)}
            for part, ids in parts.items()}}
    return out


def deepest_rank(reference: np.ndarray, torch_queries: np.ndarray, chunk_vectors: np.ndarray,
                 query_vectors: np.ndarray, queries: list, k: int = 20) -> int:
    """The deepest torch rank (1-based) of a chunk in a contender's top ``k``: how far rankings move."""
    rows = [i for i, q in enumerate(queries) if q.answerable]
    torch_rank = np.argsort(np.argsort(-(torch_queries[rows] @ reference.T), axis=1, kind="stable"), axis=1)
    top = np.argsort(-(query_vectors[rows] @ chunk_vectors.T), axis=1, kind="stable")[:, :k]
    return int(np.take_along_axis(torch_rank, top, axis=1).max()) + 1


def retrieval(args: argparse.Namespace) -> None:
    results = {name: evaluate_set(name, ["torch", *[c for c in args.contenders if c != "torch"]], args) for name in args.sets}
    (args.work / "retrieval.json").write_text(json.dumps(results, indent=1))
    print("| contender | set | part | queries | R@5 | MRR | ΔR@5 | ΔMRR | max cos gap | mean cos gap |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, by_contender in results.items():
        torch_row = by_contender["torch"]
        for contender, row in by_contender.items():
            for part in [p for p in ("all", "dev", "test") if p in row]:
                r, t = row[part], torch_row[part]
                print(f"| {contender} | {name} | {part} | {r['queries']} | {r['recall@5']:.4f} | {r['mrr']:.4f} | "
                      f"{r['recall@5'] - t['recall@5']:+.4f} | {r['mrr'] - t['mrr']:+.4f} | "
                      f"{row['cos_gap']['max']:.2e} | {row['cos_gap']['mean']:.2e} |")


def speed(args: argparse.Namespace) -> None:
    """Chunks/s of each contender on long and short realdocs chunks, interleaved round by round."""
    import torch

    _, texts = corpus(SETS["realdocs"][0])
    texts = [texts[i] for i in np.random.default_rng(11).permutation(len(texts))]
    words = [len(t.split()) for t in texts]
    sets = {"long (>= 120 words)": [t for t, w in zip(texts, words) if w >= 120][: args.speed_n],
            "short (< 30 words)": [t for t, w in zip(texts, words) if w < 30][: args.speed_n]}
    names = ["torch", *[c for c in args.contenders if c != "torch"]]
    for set_name, batch in sets.items():
        print(f"set {set_name}: {len(batch)} chunks, {np.mean([len(t.split()) for t in batch]):.0f} words mean")
    print(f"| threads | set | {' | '.join(names)} |", flush=True)
    for threads in args.speed_threads:
        args.threads = threads
        models = {name: embedder(name, args) for name in names}
        best = {(name, s): 0.0 for name in names for s in sets}
        for repeat in range(args.repeats):
            for name in names[repeat % len(names):] + names[: repeat % len(names)]:  # rotate who goes first
                torch.set_num_threads(threads)
                for set_name, batch in sets.items():
                    started = time.perf_counter()
                    models[name].embed_texts(batch)
                    best[(name, set_name)] = max(best[(name, set_name)], len(batch) / (time.perf_counter() - started))
        for set_name in sets:
            rates = " | ".join(f"{best[(n, set_name)]:.1f} ({best[(n, set_name)] / best[('torch', set_name)]:.2f}x)"
                               for n in names)
            print(f"| {threads} | {set_name} | {rates} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["agree", "retrieval", "speed"])
    parser.add_argument("contenders", nargs="*", help=f"torch, onnx, onnx-int8, onnx-int8-mixed or {', '.join(RECIPES)}")
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--sample", type=int, default=300, help="realdocs chunks for the agree screen")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--stored-torch", action="store_true",
                        help="torch chunk vectors from the catalog's embeddings table (the torch fingerprint's)")
    parser.add_argument("--pool", type=int, default=0, help="rank only the union of torch's top POOL chunks per query")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kb_embed_quality"))
    parser.add_argument("--cache-dir", default=None, help="ONNX export cache (default: the embedder's)")
    parser.add_argument("--speed-n", type=int, default=64, help="chunks per speed set")
    parser.add_argument("--speed-threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--golden-kb", type=Path, default=SETS["golden"][0], help="a catalog of golden/sources")
    parser.add_argument("--realdocs-kb", type=Path, default=SETS["realdocs"][0], help="a catalog of the realdocs corpus")
    args = parser.parse_args()
    SETS["golden"], SETS["realdocs"] = (args.golden_kb, SETS["golden"][1]), (args.realdocs_kb, SETS["realdocs"][1])
    args.work.mkdir(parents=True, exist_ok=True)
    {"agree": agree, "retrieval": retrieval, "speed": speed}[args.command](args)


if __name__ == "__main__":
    main()
