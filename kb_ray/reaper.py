"""Leave no Ray process behind when a driver that started a local Ray instance is killed.

``ray.init()`` on a laptop starts GCS, a raylet and its workers and agents. When the driver
dies from SIGKILL, GCS and the raylet die with it, but the raylet's DashboardAgent and
RuntimeEnvAgent outlive it for about a minute (they try to report the raylet's death to the
dead GCS first). :func:`watch_local_ray` starts a small watcher process in a session of its
own. It holds the read end of a pipe whose write end only the driver holds. While the driver
lives, it keeps a list of the Ray processes of that instance: the raylet, GCS and every
process descending from them. When the pipe closes without the driver saying ``done``
(``stop``, after ``ray.shutdown()``), the driver died: after a short grace period the watcher
SIGKILLs whatever is left of that list. A pid is matched with its start time, so a reused
pid is never killed. Linux only (it reads ``/proc``); elsewhere nothing is started.

Run as ``python -m kb_ray.reaper <pid> [<pid> ...]`` with the root pids.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from kb_ray.processes import descendants, has_proc, start_time

GRACE_S = 2.0
SCAN_S = 1.0


class RayReaper:
    """The driver's handle on its watcher process."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def stop(self) -> None:
        """Ray was shut down cleanly: tell the watcher to exit without killing anything."""
        try:
            self.process.stdin.write(b"done\n")
            self.process.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        self.process.wait(timeout=10)


def watch_local_ray(root_pids: list[int]) -> RayReaper | None:
    """Start the watcher over these Ray processes (and all their descendants)."""
    if not has_proc() or not root_pids:
        return None
    process = subprocess.Popen([sys.executable, "-m", "kb_ray.reaper", *map(str, root_pids)], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               close_fds=True)
    return RayReaper(process)


def _watch(roots: list[int]) -> None:
    known: dict[int, int] = {}  # pid -> start time, every Ray process seen while the driver lived
    while True:
        for pid in descendants(roots):
            started = start_time(pid)
            if started is not None:
                known.setdefault(pid, started)
        readable, _, _ = select.select([sys.stdin], [], [], SCAN_S)
        if readable:
            line = sys.stdin.readline()
            if line.strip() == "done":
                return
            if line == "":  # the driver is gone without saying done
                break
    time.sleep(GRACE_S)
    for pid, started in known.items():
        if start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the driver must not stop the watcher
    _watch([int(pid) for pid in sys.argv[1:]])
