"""``GeneratorDeployment`` on a real local Ray Serve, hosting the transformers backend on the
tiny LM (the same replica code runs the vLLM engine on a GPU; vLLM is not installed here):
``DeploymentGenerator`` calls it through the handle, concurrent calls go through
``@serve.batch``, and the answers equal the in-process generator's (greedy decoding). Whether
calls were gathered into one batch is not asserted (timing-dependent)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from kb_ray.answer.generators import make_generator
from kb_ray.answer.pack import evidence_pack
from kb_ray.config import AnswerSettings
from tests.answer.generator_fixtures import notes_hits

# a Serve deployment of the generator, ~22 s; the generator is tested in process in
# tests/answer/test_generators_*.py; make test-cluster (CI) runs it
pytestmark = [pytest.mark.ray, pytest.mark.slow]
PASSAGES = evidence_pack(hits=notes_hits((5,)), settings=AnswerSettings())
QUESTIONS = ["How many names are on the waiting list?", "When did the longest-waiting applicant join?",
             "Which plots were given up?"]


@pytest.fixture(scope="module")
def served(ray_session, tmp_path_factory):
    from ray import serve

    from kb_ray.dev.tiny_lm import build_tiny_lm
    from kb_ray.serving.generator_deployment import GeneratorDeployment

    path = build_tiny_lm(tmp_path_factory.mktemp("models") / "lm-tiny")
    settings = AnswerSettings(generator="transformers", model_path=path, max_new_tokens=8,
                              price_per_1k_completion_tokens=1000.0)
    app = GeneratorDeployment.options(name="AnswerGenerator", ray_actor_options={"num_cpus": 0.25}).bind(settings)
    handle = serve.run(app, name="answer-generator-test", route_prefix=None)
    yield settings, handle
    # shut Serve down, not just the app: a later module's start_service must start it again with its own
    # HTTP port (on a running Serve, new http_options are ignored and its port would refuse connections)
    serve.shutdown()


def test_the_deployment_answers_like_the_in_process_generator(served):
    from kb_ray.serving.generator_deployment import DeploymentGenerator

    settings, handle = served
    remote, local = DeploymentGenerator(handle), make_generator(settings)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda q: remote.generate(question=q, passages=PASSAGES, mode="qa"), QUESTIONS))
    expected = [local.generate(question=q, passages=PASSAGES, mode="qa") for q in QUESTIONS]
    assert [r.text for r in results] == [e.text for e in expected] and all(r.error is None for r in results)
    assert [r.prompt_tokens for r in results] == [e.prompt_tokens for e in expected]
    assert all(r.cost_usd == pytest.approx(r.completion_tokens) and r.seconds > 0 for r in results)
    assert (remote.backend, remote.model, remote.fingerprint) == (local.backend, local.model, local.fingerprint)


def test_repair_goes_through_the_deployment_too(served):
    from kb_ray.answer.types import Sentence
    from kb_ray.serving.generator_deployment import DeploymentGenerator

    settings, handle = served
    flagged = [Sentence("The list has 99 names [4].", [4], False, 0.0, "unknown_citation")]
    kwargs = {"question": QUESTIONS[0], "passages": PASSAGES, "mode": "qa", "answer": flagged[0].text,
              "flagged": flagged}
    remote = DeploymentGenerator(handle).repair(**kwargs)
    local = make_generator(settings).repair(**kwargs)
    assert remote.text == local.text and remote.prompt_tokens == local.prompt_tokens > 0
