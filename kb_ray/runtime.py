"""The one place that starts and stops Ray, and says which code is running.

``start_ray`` connects to ``ray.address`` / ``RAY_ADDRESS`` or starts a local instance.
Unless ``verbose``, Ray's own INFO output (Ray Data's execution plans and progress lines,
worker stdout) goes only to Ray's session log files, so what a person reads on the
terminal is kb-ray's progress and report; :func:`ray_log_dir` says where the logs are.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from kb_ray import __version__
from kb_ray.config import KbConfig
from kb_ray.reaper import RayReaper, watch_local_ray

logger = logging.getLogger(__name__)
WORKER_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
              "ORT_DISABLE_TELEMETRY": "1", "ORT_TELEMETRY_DISABLED": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
_QUIET_LOGGERS = ("ray", "ray.data", "ray.serve")
_reaper: RayReaper | None = None  # the watcher of the local Ray instance this process started


def start_ray(config: KbConfig, *, verbose: bool = False) -> bool:
    """Connect to or start Ray; True when this call started it (the caller shuts it down)."""
    import ray

    if ray.is_initialized():
        return False
    address = config.ray.address or os.environ.get("RAY_ADDRESS")
    options = {"runtime_env": {"env_vars": WORKER_ENV}, "logging_level": logging.INFO if verbose else logging.ERROR,
               "log_to_driver": verbose}
    if address:
        ray.init(address=address, **options)
    else:
        ray.init(num_cpus=config.ray.num_cpus, include_dashboard=False, **options)
        _watch_local_instance()
    if not verbose:
        quiet_ray_console()
    return True


def stop_ray() -> None:
    global _reaper
    import ray

    if ray.is_initialized():
        ray.shutdown()
    if _reaper is not None:
        _reaper.stop()
        _reaper = None


def _watch_local_instance() -> None:
    """Have a watcher kill this local instance's processes if this driver is killed
    (kb_ray/reaper.py): they would otherwise outlive a SIGKILLed driver."""
    global _reaper
    import ray

    try:
        node = ray._private.worker.global_worker.node
        pids = [info.process.pid for infos in node.all_processes.values() for info in infos if info.process]
    except AttributeError:  # another Ray layout: no watcher, Ray's own fate sharing only
        return
    _reaper = watch_local_ray(pids)


def quiet_ray_console() -> None:
    """Keep Ray's INFO records off the console: console handlers (stream handlers that are
    not files) go to WARNING; Ray Data's session-file handler still gets everything."""
    from ray.data import DataContext
    from ray.util.debug import log_once

    DataContext.get_current().enable_progress_bars = False  # kb-ray shows its own progress
    log_once("ray_data_progress_manager_disabled")  # spends Ray Data's one-time "bars disabled" warning
    for name in _QUIET_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                handler.setLevel(logging.WARNING)


def ray_log_dir() -> str | None:
    """The running Ray session's log directory (None when Ray is not running here)."""
    try:
        import ray

        if not ray.is_initialized():
            return None
        return str(Path(ray._private.worker.global_worker.node.get_session_dir_path()) / "logs")
    except (ImportError, AttributeError):
        return None


def code_version() -> str:
    """kb-ray's version plus the git commit when running from a checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{__version__}+{commit}" if commit else __version__
