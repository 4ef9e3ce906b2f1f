"""The one read scope (kb_ray/auth/scope.py ReadScope) and the reads that go through it, Ray-free:
named-document lookups of the answer modes, the answer log's feedback, and the answerer's searches
(docs/security.md). Real Delta tables in tmp_path."""

from __future__ import annotations

import re
import uuid

import pytest

from kb_ray.answer.answerer import Answerer
from kb_ray.answer.generators import make_generator
from kb_ray.answer.log import AnswerLog, UnknownAnswerError
from kb_ray.answer.sections import DocumentReferenceError, resolve_document_ids
from kb_ray.auth.keys import Caller
from kb_ray.auth.scope import ReadScope
from kb_ray.config import AnswerSettings
from tests.index_fixtures import SyntheticDoc, write_synthetic_catalog

ALPHA = ReadScope.of(Caller(key_id="k1", tenant="alpha", role="reader", principals=()), collections=["alpha"])
BETA = ReadScope.of(Caller(key_id="k2", tenant="beta", role="reader", principals=("ops",)), collections=["beta"])


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    docs = [SyntheticDoc(key="a1", collection="alpha"), SyntheticDoc(key="a2", collection="alpha"),
            SyntheticDoc(key="b1", collection="beta"), SyntheticDoc(key="b2", collection="beta")]
    return write_synthetic_catalog(tmp_path_factory.mktemp("scope") / "kb", docs)


def test_an_unrestricted_scope_sees_everything_and_a_tenant_only_its_own():
    everyone = ReadScope.unrestricted()
    assert everyone.sees({"collection": "beta", "acl": ["x"]}) and everyone.filter({"k": 1}) == {"k": 1}
    assert ALPHA.sees({"collection": "alpha", "acl": []}) and not ALPHA.sees({"collection": "beta", "acl": []})
    assert not BETA.sees({"collection": "beta", "acl": ["finance"]}) and BETA.sees({"collection": "beta", "acl": ["ops"]})
    assert not ALPHA.sees(None) and not everyone.sees(None)
    assert ALPHA.filter({"collection": ["beta"], "acl_any": ["ceo"]})["collection"] == []
    assert ALPHA.filter(ALPHA.filter(None)) == ALPHA.filter(None)  # idempotent: scoping twice changes nothing


def test_rows_a_tenant_wrote_are_its_own_alone():
    assert ALPHA.owns_tenant_row("alpha") and not ALPHA.owns_tenant_row("beta")
    assert not ALPHA.owns_tenant_row(None)  # written with auth off: nobody's once auth is on
    assert ReadScope.unrestricted().owns_tenant_row("beta") and ReadScope.unrestricted().owns_tenant_row(None)


def _error(catalog, reference: str, scope: ReadScope) -> DocumentReferenceError:
    with pytest.raises(DocumentReferenceError) as raised:
        resolve_document_ids(catalog, [reference], scope=scope)
    return raised.value


@pytest.mark.parametrize("reference", ["doc_b1", "Title b1", "b1", "mem://b1"])
def test_another_tenants_document_is_as_unknown_as_one_that_never_existed(catalog, reference):
    """By id, title, key or uri: the same 404 and message as a made-up name, candidates from the
    caller's own documents only, and no URI in the message."""
    foreign = _error(catalog, reference, ALPHA)
    made_up = _error(catalog, "zz-no-such-document", ALPHA)
    assert foreign.not_found and made_up.not_found
    assert str(foreign).replace(repr(reference), "REF") == str(made_up).replace(repr("zz-no-such-document"), "REF")
    assert {c["document_id"] for c in foreign.candidates} <= {"doc_a1", "doc_a2"}
    assert "b1" not in str(foreign).replace(repr(reference), "") and "mem://" not in str(foreign).replace(repr(reference), "")
    assert resolve_document_ids(catalog, [reference], scope=BETA) == ["doc_b1"]  # its owner finds it


def test_a_title_both_tenants_could_mean_resolves_inside_the_scope(catalog):
    assert resolve_document_ids(catalog, ["Title a1", "doc_a2"], scope=ALPHA) == ["doc_a1", "doc_a2"]
    ambiguous = _error(catalog, "Title", ALPHA)  # contained in every title: ambiguous among alpha's only
    assert not ambiguous.not_found and {c["document_id"] for c in ambiguous.candidates} == {"doc_a1", "doc_a2"}
    assert not re.search(r"doc_b\d", str(ambiguous))


def _logged(log: AnswerLog, *, tenant: str | None) -> str:
    answer_id = uuid.uuid4().hex
    log.append({"query": "q", "mode": "qa"}, {"id": answer_id, "mode": "qa", "answer": "a", "citations": [],
                                               "sentences": [], "timings_ms": {}}, tenant=tenant)
    return answer_id


@pytest.mark.parametrize("pending", [True, False])
def test_feedback_is_taken_only_on_the_tenants_own_answers(catalog, pending):
    log = AnswerLog(catalog, max_pending=100 if pending else 1, max_delay_s=60)
    betas = _logged(log, tenant="beta")
    with pytest.raises(UnknownAnswerError):
        log.add_feedback(answer_id=betas, rating="down", scope=ALPHA)
    assert log.add_feedback(answer_id=betas, rating="up", scope=BETA)["answer_id"] == betas
    assert log.add_feedback(answer_id=betas, rating="up")["answer_id"] == betas  # unrestricted (auth off)
    with pytest.raises(UnknownAnswerError):  # logged with auth off: no tenant owns it
        log.add_feedback(answer_id=_logged(log, tenant=None), rating="up", scope=BETA)
    log.close()
    ratings = [row["rating"] for row in catalog.read("feedback").to_pylist() if row["answer_id"] == betas]
    assert sorted(ratings) == ["up", "up"]


def test_every_search_of_an_answer_carries_the_scope(catalog):
    """Whatever filter a mode builds (qa's own, summary's and compare's ``document_ids``), the
    search it sends holds the tenant's collections."""
    sent: list[dict] = []

    def search(body: dict) -> dict:
        sent.append(body)
        return {"hits": [], "abstain": True}

    settings = AnswerSettings()
    answerer = Answerer(settings, generator=make_generator(settings, abstain_below=0.0), search=search,
                        catalog=catalog, scope=ALPHA)
    answerer.answer({"query": "things", "filter": {"collection": ["beta"], "document_ids": ["doc_b1"]}})
    answerer.answer({"query": "things", "documents": ["Title a1"]})
    answerer.answer({"query": "things", "mode": "compare", "documents": ["doc_a1", "doc_a2"],
                     "dimensions": ["warranty"]})
    assert len(sent) >= 4 and all(body["filter"]["collection"] in ([], ["alpha"]) for body in sent)
    assert sent[0]["filter"]["collection"] == []  # beta asked for: nothing, not beta
