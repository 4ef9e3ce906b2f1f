"""The CI gate: the golden queries in the default mode (hybrid) must stay at or above the
minimums in golden/eval_thresholds.json. Also the modes that cannot run, the reranked mode
with a tiny cross-encoder, and the ``kb-ray eval`` command and job wiring."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kb_ray.eval import gate_failures, load_dataset, load_thresholds, run_eval
from kb_ray.eval.report import render_markdown, summarize, write_reports
from kb_ray.index import build_index
from kb_ray.search import HybridSearcher
from kb_ray.search.tiny_reranker import build_tiny_cross_encoder
from tests.index_fixtures import copy_kb, golden_config

REPO = Path(__file__).resolve().parents[2]
THRESHOLDS = REPO / "golden" / "eval_thresholds.json"
QUERIES = load_dataset(REPO / "golden" / "queries.jsonl")


@pytest.fixture(scope="module")
def eval_kb(golden_kb, tmp_path_factory) -> str:
    root = copy_kb(golden_kb, tmp_path_factory.mktemp("eval") / "kb")
    build_index(golden_config(root))
    return root


@pytest.fixture(scope="module")
def hybrid_summary(eval_kb, text_embedder) -> dict:
    config = golden_config(eval_kb)
    searcher = HybridSearcher.open(config, embedder=text_embedder)
    thresholds = load_thresholds(THRESHOLDS)
    result = run_eval(config, QUERIES, modes=(thresholds["mode"],), k=thresholds["k"], searcher=searcher,
                      dataset="golden/queries.jsonl")
    return summarize(result)


def test_hybrid_retrieval_meets_the_stored_thresholds(hybrid_summary):
    assert gate_failures(hybrid_summary, load_thresholds(THRESHOLDS)) == [], render_markdown(hybrid_summary)


def test_every_cited_quote_is_canonical_text_and_no_answer_scores_are_reported(hybrid_summary):
    mode = hybrid_summary["modes"]["hybrid"]
    assert mode["citations"]["quote_mismatches"] == 0 and mode["citations"]["hits_checked"] == 20 * len(QUERIES)
    assert mode["answerable"] == sum(q.answerable for q in QUERIES)
    assert mode["scores"]["dense"]["no_answer"]["n"] == len(QUERIES) - mode["answerable"]
    assert set(mode["by_kind"]) == {q.kind for q in QUERIES if q.answerable}
    quotes = hybrid_summary["quotes"]
    assert quotes["ambiguous"] == [] and quotes["no_chunk_covers"] == []


def test_unavailable_modes_are_skipped_with_a_note(eval_kb, text_embedder, tmp_path):
    config = golden_config(eval_kb)
    searcher = HybridSearcher.open(config, embedder=text_embedder)
    summary = summarize(run_eval(config, QUERIES[:2], modes=("hybrid+rerank", "page", "hybrid+page"),
                                 searcher=searcher))
    notes = {name: mode["note"] for name, mode in summary["modes"].items()}
    assert "search.rerank_model_path" in notes["hybrid+rerank"]
    assert all("not available" in note for note in notes.values())
    markdown, json_path = write_reports(summary, tmp_path / "eval.md", command="kb-ray eval")
    assert "not available" in markdown.read_text() and json.loads(json_path.read_text())["k"] == 20


def test_reranked_mode_runs_with_a_tiny_cross_encoder(eval_kb, text_embedder, tmp_path):
    model = build_tiny_cross_encoder(tmp_path / "tiny-ce")
    config = golden_config(eval_kb, f"search.rerank_model_path={model}", "search.rerank_candidates=8")
    searcher = HybridSearcher.open(config, embedder=text_embedder)
    summary = summarize(run_eval(config, QUERIES[:3], modes=("hybrid+rerank", "dense"), k=5, searcher=searcher))
    assert summary["modes"]["hybrid+rerank"]["available"] and summary["modes"]["dense"]["available"]
    assert summary["modes"]["hybrid+rerank"]["citations"]["hits_checked"] == 15


def test_eval_command_prints_json_and_the_job_parses_the_same_options(eval_kb, tmp_path, capsys):
    from jobs.eval import parser as job_parser
    from kb_ray.cli import eval_command

    dataset = tmp_path / "q.jsonl"
    dataset.write_text("\n".join(q.model_dump_json() for q in (QUERIES[0], QUERIES[-1])) + "\n")
    commands = argparse.ArgumentParser().add_subparsers()
    eval_command.register(commands)
    args = commands.choices["eval"].parse_args(["--dataset", str(dataset), "--modes", "lexical,page", "--json",
                                                "--no-report", "--set", f"kb_root={eval_kb}"])
    assert eval_command.run(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["modes"]["lexical"]["queries"] == 2 and not printed["modes"]["page"]["available"]
    job_args = job_parser().parse_args(["--modes", "hybrid", "--k", "5"])
    assert job_args.modes == ("hybrid",) and job_args.k == 5 and job_args.dataset == "golden/queries.jsonl"
    with pytest.raises(SystemExit):
        commands.choices["eval"].parse_args(["--modes", "fuzzy"])
