"""Bm25Matrix keeps term frequencies and lengths (index format 4): re-weighting with other
statistics gives exactly the weights a build with them gives; live counts equal the
statistics of the live rows."""

from __future__ import annotations

import numpy as np
import pytest

from kb_ray.index.bm25 import Bm25Matrix, CorpusStatistics

ROWS = [["pump", "seal", "pump"], ["valve"], ["seal", "valve", "valve", "rail"], [], ["pump"]]
OTHER = [["pump", "bike"], ["seal"], ["seal", "seal", "valve", "rail", "tunnel"]] * 3


def test_reweighted_equals_a_build_with_those_statistics_bit_for_bit(tmp_path):
    built = Bm25Matrix.build(ROWS, CorpusStatistics.of(ROWS))
    target = CorpusStatistics.of(ROWS + OTHER)
    expected = Bm25Matrix.build(ROWS, target)
    assert not np.array_equal(built.weights, expected.weights)  # the statistics matter
    built.save(tmp_path, "body")
    loaded = Bm25Matrix.load(tmp_path, "body", len(ROWS))
    assert loaded.weights.tobytes() == built.weights.tobytes()
    assert loaded.reweighted(target).weights.tobytes() == expected.weights.tobytes()


def test_live_counts_are_the_statistics_of_the_live_rows():
    matrix = Bm25Matrix.build(ROWS, CorpusStatistics.of(ROWS))
    live = np.array([True, False, True, True, False])
    frequency, rows, length = matrix.live_counts(live)
    kept = [r for r, keep in zip(ROWS, live) if keep]
    assert CorpusStatistics.from_counts(frequency, rows, length) == CorpusStatistics.of(kept)


def test_a_matrix_without_frequencies_cannot_be_reweighted(tmp_path):
    matrix = Bm25Matrix.build(ROWS, CorpusStatistics.of(ROWS))
    matrix.save(tmp_path, "body")
    (tmp_path / "body.tf.npy").unlink()  # what an index format 3 generation holds
    old = Bm25Matrix.load(tmp_path, "body", len(ROWS))
    assert not old.reweightable
    with pytest.raises(ValueError, match="rebuild"):
        old.reweighted(CorpusStatistics.of(ROWS))
