"""The Serve application for ``serve run serve.app:app`` and ``serve deploy serve/config.yaml``.

Importing this module only loads the config named by ``KB_RAY_CONFIG`` (default
``conf/local.yaml``; ``KB_RAY_SET`` holds ``;``-separated ``key=value`` overrides) and binds
the deployment graph; nothing starts until Serve deploys ``app``. The wiring lives in
:mod:`kb_ray.serving.app`, the deployments in :mod:`kb_ray.serving.deployments`.
"""

from kb_ray.serving.app import app_from_env

app = app_from_env()
