"""Dev/test split: the seeded rule, the split file beside the dataset, ``--split`` in the CLI,
and the committed realdocs split covering its dataset exactly."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kb_ray.eval.dataset import DatasetError, EvalQuery, load_dataset
from kb_ray.eval.split import assign, main, make_split, select_split, split_path

REPO = Path(__file__).resolve().parents[2]


def _queries(n: int) -> list[EvalQuery]:
    return [EvalQuery(id=f"q{i:03d}", query=f"question {i}", relevant=[], kind="factoid", answer="-")
            for i in range(n)]


def _write(tmp_path: Path, queries: list[EvalQuery]) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text("".join(q.model_dump_json() + "\n" for q in queries), encoding="utf-8")
    return path


def test_the_rule_depends_on_seed_and_id_only_and_keeps_about_the_fraction():
    queries = _queries(400)
    split = make_split(queries, seed=12, dev_fraction=0.4)
    shuffled = make_split(list(reversed(queries)), seed=12, dev_fraction=0.4)
    assert set(shuffled["dev"]) == set(split["dev"]) and set(shuffled["test"]) == set(split["test"])
    assert 0.33 < len(split["dev"]) / 400 < 0.47
    assert set(split["dev"]).isdisjoint(split["test"]) and len(split["dev"]) + len(split["test"]) == 400
    assert make_split(queries, seed=13, dev_fraction=0.4)["dev"] != split["dev"]
    grown = make_split(_queries(450), seed=12, dev_fraction=0.4)
    assert set(split["dev"]) <= set(grown["dev"])  # adding questions moves none of the others
    assert assign("q001", seed=12, dev_fraction=0.0) == "test" and assign("q001", seed=12, dev_fraction=1.0) == "dev"


def test_select_split_reads_the_file_beside_the_dataset(tmp_path):
    queries = _queries(30)
    dataset = _write(tmp_path, queries)
    assert main([str(dataset), "--seed", "3"]) == 0
    assert split_path(dataset) == tmp_path / "q.split.json"
    dev = select_split(queries, dataset=dataset, split="dev")
    test = select_split(queries, dataset=dataset, split="test")
    assert {q.id for q in dev} | {q.id for q in test} == {q.id for q in queries}
    assert not {q.id for q in dev} & {q.id for q in test}
    assert select_split(queries, dataset=dataset, split="all") == queries


def test_missing_or_stale_split_files_are_clear_errors(tmp_path):
    queries = _queries(5)
    dataset = _write(tmp_path, queries)
    with pytest.raises(DatasetError, match="does not exist"):
        select_split(queries, dataset=dataset, split="dev")
    split_path(dataset).write_text(json.dumps({"dev": ["gone"], "test": []}))
    with pytest.raises(DatasetError, match="regenerate the split"):
        select_split(queries, dataset=dataset, split="dev")
    with pytest.raises(DatasetError, match="empty"):
        select_split(queries, dataset=dataset, split="test")
    with pytest.raises(DatasetError, match="unknown split"):
        select_split(queries, dataset=dataset, split="train")


def test_the_eval_command_takes_split_and_no_naive():
    from kb_ray.cli import eval_command

    commands = argparse.ArgumentParser().add_subparsers()
    eval_command.register(commands)
    args = commands.choices["eval"].parse_args(["--split", "test", "--no-naive"])
    assert args.split == "test" and args.no_naive
    assert commands.choices["eval"].parse_args([]).split == "all"
    with pytest.raises(SystemExit):
        commands.choices["eval"].parse_args(["--split", "train"])


def test_the_committed_realdocs_split_covers_its_dataset():
    dataset = REPO / "benchmarks" / "realdocs" / "queries.jsonl"
    queries = load_dataset(dataset)
    stored = json.loads(split_path(dataset).read_text())
    assert sorted(stored["dev"] + stored["test"]) == sorted(q.id for q in queries)
    assert stored == make_split(queries, seed=stored["seed"], dev_fraction=stored["dev_fraction"])
