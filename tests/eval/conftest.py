"""Fixtures for eval tests: the session golden catalog (tests/index_fixtures.py)."""

import pytest  # noqa: E402

from tests.index_fixtures import golden_kb, text_embedder  # noqa: F401  (pytest fixtures)


@pytest.fixture(scope="module")
def eval_summary_with_naive(golden_kb, text_embedder, tmp_path_factory) -> dict:
    """Golden catalog, lexical mode + the naive reference (default), first 12 queries."""
    from pathlib import Path

    from kb_ray.eval import load_dataset, run_eval
    from kb_ray.eval.report import summarize
    from kb_ray.index import build_index
    from kb_ray.search import HybridSearcher
    from tests.index_fixtures import copy_kb, golden_config

    root = copy_kb(golden_kb, tmp_path_factory.mktemp("naive") / "kb")
    build_index(golden_config(root))
    queries = load_dataset(Path(__file__).resolve().parents[2] / "golden" / "queries.jsonl")[:12]
    searcher = HybridSearcher.open(golden_config(root), embedder=text_embedder)
    return summarize(run_eval(golden_config(root), queries, modes=("lexical",), k=10, searcher=searcher))
