"""Dev/test split of an eval dataset, recorded beside it in ``<stem>.split.json``.

A query goes to ``dev`` when ``sha256(f"{seed}:{id}")`` read as a fraction of 2**256 is
below ``dev_fraction``, else to ``test``: fixed by the seed, independent of line order,
and adding a question never moves another one. The file lists the ids of each part so
the split is reviewable and stays put even if the rule's inputs change. ``dev`` is for
anything tuned or fitted; ``test`` alone is reported.

    python -m kb_ray.eval.split benchmarks/realdocs/queries.jsonl --seed 12 --dev-fraction 0.4
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from kb_ray.eval.dataset import DatasetError, EvalQuery, load_dataset

SPLITS = ("dev", "test", "all")


def split_path(dataset: str | Path) -> Path:
    dataset = Path(dataset)
    return dataset.with_name(dataset.stem + ".split.json")


def assign(query_id: str, *, seed: int, dev_fraction: float) -> str:
    digest = int.from_bytes(hashlib.sha256(f"{seed}:{query_id}".encode()).digest(), "big")
    return "dev" if digest < dev_fraction * 2**256 else "test"


def make_split(queries: list[EvalQuery], *, seed: int, dev_fraction: float) -> dict:
    parts = {"dev": [], "test": []}
    for query in queries:
        parts[assign(query.id, seed=seed, dev_fraction=dev_fraction)].append(query.id)
    return {"seed": seed, "dev_fraction": dev_fraction,
            "rule": "dev if sha256(f'{seed}:{id}') / 2**256 < dev_fraction, else test", **parts}


def select_split(queries: list[EvalQuery], *, dataset: str | Path, split: str) -> list[EvalQuery]:
    """The queries of ``split`` (``all``: every query) per the dataset's split file."""
    if split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}; use {', '.join(SPLITS)}")
    if split == "all":
        return queries
    path = split_path(dataset)
    if not path.is_file():
        raise DatasetError(f"--split {split}: {path} does not exist; make it with "
                           f"'python -m kb_ray.eval.split {dataset}' or use --split all")
    ids = set(json.loads(path.read_text(encoding="utf-8")).get(split) or [])
    unknown = ids - {q.id for q in queries}
    if unknown:
        raise DatasetError(f"{path}: ids not in {dataset}: {', '.join(sorted(unknown)[:5])}; regenerate the split")
    chosen = [q for q in queries if q.id in ids]
    if not chosen:
        raise DatasetError(f"{path}: the {split} split is empty")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write <dataset stem>.split.json (dev/test ids)")
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--dev-fraction", type=float, default=0.4)
    args = parser.parse_args(argv)
    split = make_split(load_dataset(args.dataset), seed=args.seed, dev_fraction=args.dev_fraction)
    split_path(args.dataset).write_text(json.dumps(split, indent=1) + "\n", encoding="utf-8")
    print(f"{split_path(args.dataset)}: {len(split['dev'])} dev, {len(split['test'])} test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
