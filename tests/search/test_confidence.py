"""Confidence (kb_ray/search/confidence.py): features, the logistic fit, bounds, monotonicity, abstain."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kb_ray.search.confidence import (
    DEFAULT_MODEL_PATH,
    FEATURES,
    ConfidenceModel,
    ConfidenceModelError,
    abstains,
    fit_logistic,
    hit_features,
    packaged_model_path,
    unknown_share,
)


def _hit(dense=0.5, lexical=5.0, cosine=0.5, cover=0.5):
    return {"scores": {"dense": dense, "lexical": lexical, "fused": 0.03},
            "evidence": {"signals": {"cosine": cosine, "coverage": cover}}}


def _fitted(seed=0) -> ConfidenceModel:
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for _ in range(400):
        good = rng.random() < 0.4
        shift = 0.25 if good else 0.0
        rows.append({"dense": rng.normal(0.35 + shift, 0.1), "lexical": rng.normal(0.4 + 2 * shift, 0.2),
                     "evidence_cosine": rng.normal(0.3 + shift, 0.1), "evidence_coverage": rng.uniform(0, 1),
                     "agree": float(rng.random() < (0.8 if good else 0.4))})
        labels.append(int(good))
    return fit_logistic(rows, labels)


def test_features_read_raw_scores_and_fill_what_a_retriever_missed():
    full = hit_features(_hit(), query="seal kit part", dense_floor=0.2)
    assert set(full) == set(FEATURES) and full["agree"] == 1.0 and full["dense"] == 0.5
    assert full["lexical"] == pytest.approx(np.log1p(5.0) / 3)
    missed = hit_features({"scores": {"dense": None, "lexical": 2.0}}, query="seal", dense_floor=0.2)
    assert missed["dense"] == 0.2 and missed["agree"] == 0.0 and missed["evidence_cosine"] == 0.0


def test_a_passage_chosen_by_coverage_alone_counts_its_chunks_cosine():
    hit = {"scores": {"dense": 0.61, "lexical": 2.0}, "evidence": {"signals": {"coverage": 0.5}}}
    assert hit_features(hit, query="seal", dense_floor=0.2)["evidence_cosine"] == 0.61
    hit["evidence"]["signals"]["cosine"] = 0.7
    assert hit_features(hit, query="seal", dense_floor=0.2)["evidence_cosine"] == 0.7


def test_fit_separates_the_classes_and_confidence_is_a_probability():
    model = _fitted()
    assert model.coef["dense"] > 0 and model.coef["lexical"] > 0 and model.coef["evidence_cosine"] > 0
    values = model.predict([hit_features(_hit(d, l, c), query="a b", dense_floor=None)
                            for d, l, c in [(-1, 0, -1), (0.3, 2, 0.3), (0.9, 50, 0.9), (5, 1e6, 5)]])
    assert all(0.0 <= v <= 1.0 for v in values) and values == sorted(values) and values[0] < 0.2 < 0.8 < values[-1]


def test_confidence_is_monotone_in_each_positively_weighted_signal():
    model = _fitted(1)
    for name in ("dense", "lexical", "evidence_cosine"):
        base = {"dense": 0.4, "lexical": 0.5, "evidence_cosine": 0.3, "evidence_coverage": 0.5, "agree": 1.0}
        grid = [dict(base, **{name: v}) for v in np.linspace(0, 1, 11)]
        values = model.predict(grid)
        assert all(b >= a for a, b in zip(values, values[1:])), (name, values)


def test_model_round_trips_through_json_and_rejects_foreign_files(tmp_path):
    model = _fitted()
    path = tmp_path / "model.json"
    path.write_text(model.to_json())
    again = ConfidenceModel.load(path)
    rows = [{"dense": 0.3, "lexical": 0.1, "evidence_cosine": 0.2, "evidence_coverage": 1.0, "agree": 0.0}]
    assert again.predict(rows) == model.predict(rows)
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ConfidenceModelError, match="refit"):
        ConfidenceModel.load(path)
    with pytest.raises(ConfidenceModelError, match="cannot read"):
        ConfidenceModel.load(tmp_path / "missing.json")


def test_fitting_needs_both_classes():
    with pytest.raises(ConfidenceModelError, match="both"):
        fit_logistic([dict.fromkeys(FEATURES, 0.0)] * 3, [0, 0, 0])


def test_abstain_when_no_hit_reaches_the_threshold():
    assert abstains([0.1, 0.3], below=0.5) is True
    assert abstains([0.1, 0.7], below=0.5) is False
    assert abstains([], below=0.5) is True


@pytest.mark.parametrize("evidence", ["hybrid", "lexical"])
def test_each_evidence_mode_has_a_packaged_model_fitted_with_it(evidence):
    model = ConfidenceModel.load(packaged_model_path(evidence))
    assert model.abstain_below is not None and 0.0 < model.abstain_below < 1.0
    assert model.info and model.info.get("fitted_on") and model.info["evidence"] == evidence
    assert packaged_model_path("none") == DEFAULT_MODEL_PATH


def test_the_assembler_loads_the_model_of_its_evidence_mode(caplog):
    """With lexical evidence ``evidence_cosine`` is the chunk's dense cosine: a hybrid-fitted
    model would misread it, so the searcher takes the model fitted on lexical evidence."""
    from kb_ray.config import SearchSettings
    from kb_ray.search.assembly import HitAssembler

    for evidence in ("hybrid", "lexical"):
        assembler = HitAssembler(SearchSettings(evidence=evidence))
        assert assembler.model.info["evidence"] == evidence
        assert assembler.abstain_below == ConfidenceModel.load(packaged_model_path(evidence)).abstain_below
    assert "not calibrated" not in caplog.text


def test_abstain_is_unknown_without_a_dense_signal_and_decided_with_one():
    """The packaged model was fitted on hybrid hits: lexical-only hits get a confidence but no
    abstain verdict (on the realdocs test split lexical mode otherwise abstained on every query)."""
    from kb_ray.config import SearchSettings
    from kb_ray.search.assembly import HitAssembler

    assembler = HitAssembler(SearchSettings(abstain_below=0.5))
    lexical_only = [{"scores": {"lexical": 12.0}, "evidence": None}]
    assert assembler.confidence("pump seal kit", lexical_only, dense_floor=None) is None
    assert 0.0 <= lexical_only[0]["confidence"] <= 1.0
    weak = [{"scores": {"dense": 0.05, "lexical": 0.1}, "evidence": None}]
    assert assembler.confidence("pump seal kit", weak, dense_floor=0.05) is True


def test_unknown_share_weighs_missing_terms_by_their_idf():
    from kb_ray.index.bm25 import CorpusStatistics

    statistics = CorpusStatistics({"seal": 40, "pump": 3}, 100, 0.0)
    assert unknown_share(["pump", "seal"], statistics) == 0.0
    assert unknown_share(["zorblax"], statistics) == 1.0
    assert unknown_share([], statistics) == 0.0
    both = unknown_share(["seal", "zorblax"], statistics)
    rare = unknown_share(["pump", "zorblax"], statistics)
    assert 0.5 < both < 1.0  # the missing term has the highest IDF, so it weighs more than half
    assert rare < both  # beside a rare known term it weighs less than beside a common one
    assert unknown_share(["zorblax", "zorblax", "seal"], statistics) == both  # distinct terms
    assert unknown_share(["seal", "zorblax"], statistics, common={"zorblax"}) == 0.0


def test_the_assembler_passes_the_querys_unknown_share_to_the_model():
    from kb_ray.config import SearchSettings
    from kb_ray.search.assembly import HitAssembler

    assembler = HitAssembler(SearchSettings())
    assert assembler.model.unknown_penalty > 0  # the packaged model was calibrated with one
    plain, odd = [_hit()], [_hit()]
    assembler.confidence("pump seal kit", plain, dense_floor=None)
    assembler.confidence("pump seal kit", odd, dense_floor=None, unknown=0.5)
    assert odd[0]["confidence"] < plain[0]["confidence"]
    assert (plain[0]["confidence_features"]["unknown"], odd[0]["confidence_features"]["unknown"]) == (0.0, 0.5)


def test_the_unknown_penalty_lowers_every_confidence_alike_and_keeps_the_order():
    from dataclasses import replace

    model = replace(_fitted(), unknown_penalty=5.0)
    hits = [hit_features(_hit(dense=d, lexical=d * 10), query="pump seal kit", dense_floor=None)
            for d in (0.2, 0.4, 0.6)]
    plain, penalized = model.predict(hits), model.predict(hits, unknown=0.5)
    assert plain == replace(model, unknown_penalty=0.0).predict(hits, unknown=0.5)
    assert all(p < q for p, q in zip(penalized, plain))
    assert np.argsort(penalized).tolist() == np.argsort(plain).tolist()
    logit = lambda c: np.log(c / (1 - c))  # noqa: E731
    assert np.allclose(logit(np.array(plain)) - logit(np.array(penalized)), 2.5, atol=0.01)


def test_a_model_written_before_the_unknown_penalty_loads_with_none(tmp_path):
    data = json.loads(_fitted().to_json())
    del data["unknown_penalty"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    assert ConfidenceModel.load(path).unknown_penalty == 0.0


def test_calibration_chooses_a_penalty_only_where_unknown_terms_mark_the_no_answer_questions():
    from kb_ray.eval.calibrate import choose_unknown_penalty, fit, recalibrate

    rng = np.random.default_rng(3)

    def rows(informative: bool) -> list[dict]:
        out = []
        for n in range(80):
            answerable = n % 4 != 0
            hits = [({"dense": rng.normal(0.45 if answerable else 0.4, 0.1), "lexical": rng.normal(0.4, 0.1),
                      "evidence_cosine": 0.5, "evidence_coverage": rng.uniform(0, 1), "agree": 1.0},
                     int(answerable and k == 0)) for k in range(5)]
            unknown = (0.0 if answerable else 0.6) if informative else 0.6  # else: every query alike
            out.append({"answerable": answerable, "unknown": unknown, "hits": hits})
        return out

    informative = fit(rows(True), info={})
    assert informative.unknown_penalty > 0
    kept = recalibrate(rows(True), _fitted(), {"fitted_on": "dev.jsonl"})  # another model's hit coefficients
    assert (kept.coef, kept.intercept) == (_fitted().coef, _fitted().intercept)
    assert kept.unknown_penalty > 0 and kept.abstain_below is not None
    assert kept.info["recalibrated"] == {"fitted_on": "dev.jsonl"}
    assert choose_unknown_penalty(rows(False), informative) == 0.0  # a shift every query shares ranks nothing
    assert choose_unknown_penalty([r for r in rows(True) if r["answerable"]], informative) == 0.0
