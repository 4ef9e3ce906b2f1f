"""Find, count and kill the replicas of a running Serve deployment (fault drills, tests)."""

from __future__ import annotations

import logging
import time

from kb_ray.serving.app import APP_NAME

logger = logging.getLogger(__name__)


def replica_actor_names(*, deployment: str, app: str = APP_NAME) -> list[str]:
    """Names of the live replica actors of ``deployment`` (namespace ``serve``)."""
    import ray

    marker = f"{app}#{deployment}#"
    return sorted(actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)
                  if actor.get("namespace") == "serve" and marker in actor["name"])


def running_replicas(*, deployment: str, app: str = APP_NAME) -> int:
    from ray import serve

    status = serve.status().applications[app].deployments[deployment]
    return int(status.replica_states.get("RUNNING", 0))


def kill_one_replica(*, deployment: str, app: str = APP_NAME) -> str:
    """``ray.kill`` the first replica actor of ``deployment`` (no restart by Ray: Serve's
    controller notices and starts a replacement); returns the killed actor's name."""
    import ray

    names = replica_actor_names(deployment=deployment, app=app)
    if not names:
        raise LookupError(f"no running replica of {app}/{deployment}; is the service up?")
    ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
    logger.info("killed replica %s", names[0])
    return names[0]


def wait_for_replicas(*, deployment: str, count: int, killed: str | None = None, timeout_s: float = 60.0,
                      app: str = APP_NAME) -> float:
    """Seconds until ``deployment`` has ``count`` RUNNING replicas again, none of them the
    ``killed`` actor; TimeoutError after ``timeout_s``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        names = [n for n in replica_actor_names(deployment=deployment, app=app) if n != killed]
        if len(names) >= count and running_replicas(deployment=deployment, app=app) >= count:
            return time.monotonic() - started
        time.sleep(0.25)
    raise TimeoutError(f"{app}/{deployment} has fewer than {count} running replicas after {timeout_s:.0f} s")
