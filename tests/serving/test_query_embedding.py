"""The ingress's own query embedding (kb_ray/serving/query_embedding.py), without Ray: a batch
gives each query the vector the embedder gives it alone, and the deployment variant sends a call
whose replica died once more."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from ray.exceptions import RayActorError

from kb_ray.serving.query_embedding import DeploymentQueryEmbedder, IngressQueryEmbedder, query_embedding_for
from tests.index_fixtures import golden_config


@pytest.fixture(scope="module")
def ingress_embedding(tmp_path_factory):
    return query_embedding_for(golden_config(tmp_path_factory.mktemp("kb"), "embedding.num_threads=1"), None)


def test_the_ingress_encodes_a_batch_as_the_embedder_does_each_query(ingress_embedding):
    """Batching itself is Serve's (@serve.batch needs a replica: the Serve tests search through it);
    here: a batch's vectors are each query's own, as JSON-ready lists."""
    assert isinstance(ingress_embedding, IngressQueryEmbedder)
    queries = [f"pump seal number {n}" for n in range(5)] + ["bearing torque"]
    vectors = ingress_embedding.encode(queries)
    assert all(isinstance(vector, list) for vector in vectors)
    for query, vector in zip(queries, vectors):
        assert np.allclose(vector, ingress_embedding.embedder.embed_texts([query])[0], atol=1e-5)
    assert asyncio.run(ingress_embedding.fingerprint()) == ingress_embedding.embedder.fingerprint


class FlakyMethod:
    """A handle method whose first call finds its replica dead."""

    def __init__(self, result) -> None:
        self.result, self.calls = result, 0

    async def _call(self, *args):
        self.calls += 1
        if self.calls == 1:
            raise RayActorError()
        return self.result

    def remote(self, *args):
        return self._call(*args)


class Handle:
    def __init__(self) -> None:
        self.embed, self.fingerprint = FlakyMethod([0.5, 0.5]), FlakyMethod("fp")


def test_the_deployment_variant_sends_a_call_once_more_when_its_replica_died():
    handle = Handle()
    embedding = DeploymentQueryEmbedder(handle)
    assert asyncio.run(embedding.embed("q")) == [0.5, 0.5] and handle.embed.calls == 2
    with pytest.raises(ValueError, match="bound no QueryEmbedder"):
        query_embedding_for(golden_config("/tmp/unused", "serve.query_embedding=deployment"), None)
