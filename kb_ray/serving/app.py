"""Build the Serve application from a config, and run it on 127.0.0.1."""

from __future__ import annotations

import logging
import os

from kb_ray.config import KbConfig, load_config

logger = logging.getLogger(__name__)
APP_NAME = "kb-ray"


def build_app(config: KbConfig):
    """The bound deployment graph: ingress → (query embedder, shard searcher, reranker?, answer generator?)."""
    from kb_ray.serving.deployments import QueryEmbedder, RerankerDeployment, SearchIngress, ShardSearcher
    from kb_ray.serving.generator_deployment import bind_generator

    s = config.serve
    embedder = QueryEmbedder.options(num_replicas=s.embedder_replicas, ray_actor_options={
        "num_cpus": 0.25, "num_gpus": s.embedder_num_gpus}).bind(config)
    searcher = ShardSearcher.options(num_replicas=s.searcher_replicas, ray_actor_options={"num_cpus": 0.25}).bind(config)
    reranker = None
    if config.search.reranker_configured:  # a local cross-encoder or a remote rerank server
        device = "cuda" if s.reranker_num_gpus > 0 else "cpu"
        reranker = RerankerDeployment.options(ray_actor_options={"num_cpus": 0.25, "num_gpus": s.reranker_num_gpus}
                                              ).bind(config.search, device)
    generator = bind_generator(config.answer)  # vllm only: the engine in its own GPU deployment
    # a request the ingress holds costs it a coroutine: many may wait on a slow client or on the other
    # deployments at once (serve.ingress_max_ongoing_requests; docs/search.md "Limits at the HTTP edge")
    return SearchIngress.options(max_ongoing_requests=s.ingress_max_ongoing_requests,
                                 ray_actor_options={"num_cpus": 0.1}).bind(config, embedder, searcher, reranker,
                                                                            generator)


def app_from_env():
    """For ``serve run serve.app:app`` / ``serve deploy``: config from ``KB_RAY_CONFIG``."""
    path = os.environ.get("KB_RAY_CONFIG", "conf/local.yaml")
    overrides = [item for item in os.environ.get("KB_RAY_SET", "").split(";") if item]
    return build_app(load_config(path, overrides=overrides))


def start_service(config: KbConfig, *, port: int | None = None, blocking: bool = False, verbose: bool = False):
    """Start (or connect to) Ray, then serve the app on ``serve.host:port``. Unless ``verbose``,
    Serve's own INFO lines ("Started Serve", "Application ... is ready") stay off the console:
    importing ``ray.serve`` attaches its console handler, so it is quieted after the import."""
    from ray import serve

    from kb_ray.runtime import quiet_ray_console, start_ray

    start_ray(config, verbose=verbose)
    if not verbose:
        quiet_ray_console()
    serve.start(http_options={"host": config.serve.host, "port": port or config.serve.port})
    handle = serve.run(build_app(config), name=APP_NAME, route_prefix="/", blocking=blocking)
    logger.info("serving on http://%s:%d", config.serve.host, port or config.serve.port)
    return handle


def stop_service() -> None:
    from ray import serve

    serve.shutdown()
