"""The ``transformers`` generator on the tiny random-weight causal LM that
``kb-ray dev tiny-models`` writes (``lm-tiny``, kb_ray/dev/tiny_lm.py): the local loading and
generation code runs unchanged, and its gibberish never passes verification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb_ray.answer.answerer import Answerer
from kb_ray.answer.generators import make_generator
from kb_ray.answer.generators.prompt import answer_messages
from kb_ray.answer.pack import evidence_pack
from kb_ray.cli import main
from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError
from tests.answer.generator_fixtures import FakeSearch, notes_hits

QUESTION = "How many names are on the garden's waiting list?"
HITS = notes_hits((5,))  # one passage (the waiting list) keeps the prompt short on a busy 2-core box
PASSAGES = evidence_pack(hits=HITS, settings=AnswerSettings())


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("models")
    assert main(["dev", "tiny-models", "--out", str(out), "--only", "lm-tiny"]) == 0
    assert [p.name for p in out.iterdir()] == ["lm-tiny"]
    return str(out / "lm-tiny")


@pytest.fixture(scope="module")
def generator(tiny_lm):
    return make_generator(local_settings(tiny_lm))


def local_settings(model_path: str, **overrides) -> AnswerSettings:
    values = {"generator": "transformers", "model_path": model_path, "max_new_tokens": 12, **overrides}
    return AnswerSettings(**values)


def test_the_tiny_lm_is_small_and_a_llama(tiny_lm):
    files = list(Path(tiny_lm).iterdir())
    assert sum(f.stat().st_size for f in files) < 2 * 2**20
    assert json.loads((Path(tiny_lm) / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]


def test_generation_runs_and_returns_text_with_token_counts(generator):
    result = generator.generate(question=QUESTION, passages=PASSAGES, mode="qa")
    assert result.error is None and result.text.strip()
    assert result.prompt_tokens > 50 and 0 < result.completion_tokens <= 12 and result.seconds > 0
    assert generator.backend == "transformers" and generator.model == "lm-tiny" and len(generator.fingerprint) == 64
    assert generator.generate(question=QUESTION, passages=PASSAGES, mode="qa").text == result.text  # greedy


def test_the_prompt_goes_through_the_chat_template(generator):
    rendered = generator.render(answer_messages(question=QUESTION, passages=PASSAGES, mode="qa",
                                                refusal=generator.settings.refusal))
    assert rendered.startswith("<|im_start|>system\nYou answer questions") and rendered.endswith(
        "<|im_start|>assistant\n")


def test_its_gibberish_is_flagged_unsupported_through_the_answerer(generator):
    answerer = Answerer(generator.settings, generator=generator, search=FakeSearch(HITS))
    response = answerer.answer({"query": QUESTION})
    assert response["sentences"] and not response["abstained"]
    assert all(s["supported"] is False and s["problem"] in ("no_citation", "unknown_citation", "unsupported")
               for s in response["sentences"])
    assert response["verification"] == "flagged" and response["repaired"]
    assert response["usage"]["prompt_tokens"] > 0 and response["usage"]["completion_tokens"] > 0
    assert response["generator"]["backend"] == "transformers"


def test_fail_closed_refuses_the_gibberish(tiny_lm):
    settings = local_settings(tiny_lm, fail_closed=True, repair_rounds=0)
    answerer = Answerer(settings, generator=make_generator(settings), search=FakeSearch(HITS))
    response = answerer.answer({"query": QUESTION})
    assert response["abstained"] and response["answer"] == settings.refusal and response["verification"] == "refused"


def test_a_tokenizer_without_chat_template_gets_the_plain_prompt(tmp_path):
    from kb_ray.dev.tiny_lm import build_tiny_lm

    path = build_tiny_lm(tmp_path / "lm-plain", chat_template=False)
    plain = make_generator(local_settings(path))
    rendered = plain.render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    result = plain.generate(question=QUESTION, passages=PASSAGES, mode="qa")
    assert rendered == "System: S\n\nUser: U\n\nAssistant:"
    assert result.error is None and result.text.strip() and result.prompt_tokens > 50


def test_a_prompt_over_the_context_is_an_error_code(tiny_lm):
    generator = make_generator(local_settings(tiny_lm, max_new_tokens=8192))  # the tiny LM's context is 8192
    result = generator.generate(question=QUESTION, passages=PASSAGES, mode="qa")
    assert (result.text, result.error, result.completion_tokens) == ("", "prompt_too_long", 0)


def test_a_missing_model_directory_is_a_clear_error(tmp_path):
    with pytest.raises(KbRayError, match="answer model not found"):
        make_generator(local_settings(str(tmp_path / "nowhere")))
    with pytest.raises(KbRayError, match="answer.generator=transformers needs answer.model_path"):
        make_generator(AnswerSettings(generator="transformers"))
