"""KeySet / TableKeys: in-memory membership of catalog keys, loaded from a real Delta table."""

from __future__ import annotations

import pyarrow as pa

from kb_ray.catalog import key_set
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.key_set import KeySet, RunKeys, TableKeys
from kb_ray.ingest.rows import to_table


def shas(*values: str) -> pa.Table:
    return pa.table({"embed_text_sha": pa.array(list(values), pa.string())})


def vectors(fp: str, *values: str) -> pa.Table:
    return to_table("embeddings", [{"embedder_fp": fp, "embed_text_sha": v, "dim": 1, "vector": [0.0]}
                                   for v in values])


def test_a_loaded_set_answers_membership_per_scope_and_learns_added_keys(tmp_path):
    catalog = DeltaCatalog.open(str(tmp_path / "kb"))
    catalog.append("embeddings", vectors("fp_a", "s1", "s2"))
    catalog.append("embeddings", vectors("fp_b", "s3"))
    keys = TableKeys(catalog)
    of_a = keys.of("embeddings", ["embed_text_sha"], where={"embedder_fp": "fp_a"})
    assert of_a.contains(shas("s1", "s2", "s3", "s4"), ["embed_text_sha"]).tolist() == [True, True, False, False]
    assert keys.of("embeddings", ["embed_text_sha"], where={"embedder_fp": "fp_a"}) is of_a  # loaded once
    of_a.add(shas("s4"), ["embed_text_sha"])
    assert of_a.contains(shas("s4", "s5"), ["embed_text_sha"]).tolist() == [True, False]
    assert len(of_a) == 3


def test_composite_keys_do_not_run_into_each_other():
    keys = KeySet()
    keys.add(pa.table({"collection": ["a"], "uri": ["b/c"]}), ["collection", "uri"])
    probe = pa.table({"collection": ["a", "a/b", "a"], "uri": ["b/c", "c", None]})
    assert keys.contains(probe, ["collection", "uri"]).tolist() == [True, False, False]


def test_keys_folded_into_the_sorted_array_stay_members(monkeypatch):
    monkeypatch.setattr(key_set, "FOLD_EVERY", 4)
    keys = KeySet()
    for start in range(0, 20, 3):
        keys.add(shas(*(f"k{i}" for i in range(start, start + 3))), ["embed_text_sha"])
    assert len(keys._pending) < 4 and len(keys._sorted) >= 16
    found = keys.contains(shas(*(f"k{i}" for i in range(25))), ["embed_text_sha"]).tolist()
    assert found == [True] * 21 + [False] * 4


def test_a_stage_kept_for_the_next_run_loads_the_keys_again(tmp_path):
    catalog = DeltaCatalog.open(str(tmp_path / "kb"))
    run_keys = RunKeys(catalog)
    first = run_keys.of_run("run_1").of("embeddings", ["embed_text_sha"], where={"embedder_fp": "fp"})
    catalog.append("embeddings", vectors("fp", "s1"))  # committed by run_1's driver
    assert not first.contains(shas("s1"), ["embed_text_sha"])[0]  # run_1's snapshot
    second = run_keys.of_run("run_2").of("embeddings", ["embed_text_sha"], where={"embedder_fp": "fp"})
    assert second.contains(shas("s1"), ["embed_text_sha"])[0]


def test_values_of_a_one_column_key_are_held_in_order_and_can_be_added():
    keys = KeySet()
    keys.add(shas("a", "b"), ["embed_text_sha"])
    assert keys.held(["c", "b", "a", "b"]) == ["b", "a", "b"]
    keys.add_values(["c"])
    assert keys.held(["c", "d"]) == ["c"] and keys.contains(shas("c"), ["embed_text_sha"]).tolist() == [True]
