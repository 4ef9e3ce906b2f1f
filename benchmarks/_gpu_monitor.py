"""Whole-GPU sampling for benchmarks whose model work runs in other processes.

``torch.cuda.max_memory_allocated`` only sees the calling process, so a benchmark that
parses in several worker processes samples the device instead: pynvml when it is
importable, else ``nvidia-smi --query-gpu=utilization.gpu,memory.used -lms 200`` read line
by line in a background thread. Samples carry a timestamp, so one monitor can serve many
measured windows. Without a GPU (or without either tool) ``available`` is False and every
statistic is None.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from typing import Self

import numpy as np

_QUERY = ["--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"]


def gpu_index() -> int:
    """The physical index of the first visible GPU (nvidia-smi and NVML count all of them)."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def gpu_description() -> str | None:
    """``"NVIDIA H200, 143771 MiB"`` from nvidia-smi, or None where there is none."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "-i", str(gpu_index()), "--query-gpu=name,memory.total",
                              "--format=csv,noheader"], check=False, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


class GpuMonitor:
    """Samples (time, utilization %, memory used MiB) of one GPU every ``interval_s`` seconds."""

    def __init__(self, *, enabled: bool = True, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.samples: list[tuple[float, float, float]] = []
        self.source: str | None = None
        self._stop = threading.Event()
        self._process: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        if enabled:
            self._start()

    @property
    def available(self) -> bool:
        return self.source is not None

    def _start(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index())
            self.source, target = "pynvml", lambda: self._poll_nvml(pynvml, handle)
        except Exception:  # noqa: BLE001 - absent module or no driver: fall back to nvidia-smi
            if shutil.which("nvidia-smi") is None:
                return
            self._process = subprocess.Popen(["nvidia-smi", "-i", str(gpu_index()), *_QUERY,
                                              f"-lms={int(self.interval_s * 1000)}"],
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.source, target = "nvidia-smi", self._read_smi
        self._thread = threading.Thread(target=target, name="gpu-monitor", daemon=True)
        self._thread.start()

    def _poll_nvml(self, pynvml, handle) -> None:
        while not self._stop.is_set():
            util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
            used = pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
            self.samples.append((time.perf_counter(), float(util), float(used)))
            self._stop.wait(self.interval_s)

    def _read_smi(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            try:
                util, used = (float(part) for part in line.split(","))
            except ValueError:  # "[N/A]" or a header
                continue
            self.samples.append((time.perf_counter(), util, used))

    def window(self, start: float, stop: float) -> dict[str, float | None]:
        """Mean and p95 utilization and peak memory of the samples taken in [start, stop]."""
        inside = np.array([s[1:] for s in self.samples if start <= s[0] <= stop]).reshape(-1, 2)
        if not len(inside):
            return {"gpu_util_mean": None, "gpu_util_p95": None, "gpu_mem_peak_mib": None, "gpu_samples": 0}
        return {"gpu_util_mean": float(inside[:, 0].mean()), "gpu_util_p95": float(np.percentile(inside[:, 0], 95)),
                "gpu_mem_peak_mib": float(inside[:, 1].max()), "gpu_samples": len(inside)}

    def close(self) -> None:
        self._stop.set()
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
