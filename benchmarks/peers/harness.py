"""What both peer benchmarks share: the machine line, measuring a contender in its own
process (wall time, peak memory of its whole process tree), and writing a section of
``benchmarks/results/peers.md`` without touching the other script's section.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KB_SET_ENV = "KB_PEERS_SET"  # newline-separated config overrides for the kb-ray contenders (ingest_shape --kb-set)
RESULTS = ROOT / "benchmarks" / "results" / "peers.md"
RESULT_PREFIX = "PEER_RESULT "  # a contender prints one line "PEER_RESULT {json}" on stdout


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def machine_line() -> str:
    mem_kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal"))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.machine())
    return (f"{os.cpu_count()} CPUs ({cpu}), {mem_kib / 1024 ** 2:.1f} GiB RAM, "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


def kb_ray_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions(*packages: str) -> str:
    found = []
    for name in packages:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


# -- measuring one contender in its own process -------------------------------------------

@dataclass
class Measured:
    returncode: int
    wall_s: float
    peak_tree_pss_mib: float  # sum over the process tree, sampled every 0.5 s
    max_process_rss_mib: float  # largest single process (wait4 rusage of the child and what it waited for)
    result: dict
    stderr_tail: str
    peak_by_process: dict[str, float] = field(default_factory=dict)  # MiB per process name at the peak sample


def _session_pids(sid: int, root: int) -> list[int]:
    parents: dict[int, int] = {}
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid, session = int(entry), int(fields[1]), int(fields[3])
        parents[pid] = ppid
        if session == sid:
            members.append(pid)
    descendants = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in descendants and pid not in descendants:
                descendants.add(pid)
                changed = True
    return sorted(set(members) | descendants)


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _process_name(pid: int) -> str:
    """What the process is: Ray's title (``ray::MapWorker(...)``, ``raylet``…) or the program."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    first = argv[0].decode(errors="replace")
    if first.startswith("ray::") or not first:
        return first.split(" ")[0][:60] or "?"
    program = Path(first).name
    script = next((Path(a.decode(errors="replace")).name for a in argv[1:] if a.endswith(b".py")), "")
    return f"{program} {script}".strip()[:60]


def _sample_tree(pid: int, stop: threading.Event, peak: list[int], at_peak: dict[str, float]) -> None:
    while not stop.is_set():
        sizes = {p: _pss_kib(p) for p in _session_pids(pid, pid)}
        if sum(sizes.values()) > peak[0]:
            peak[0] = sum(sizes.values())
            at_peak.clear()
            for p, kib in sizes.items():
                name = _process_name(p)
                at_peak[name] = at_peak.get(name, 0.0) + kib / 1024
        stop.wait(0.5)


def run_measured(args: list[str], *, env: dict[str, str] | None = None, timeout_s: float = 1800) -> Measured:
    """Run ``python args...`` in a new session; sample the tree's PSS until it exits."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, *args], cwd=ROOT, env={**os.environ, **(env or {})},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    stop, peak, at_peak = threading.Event(), [0], {}
    sampler = threading.Thread(target=_sample_tree, args=(process.pid, stop, peak, at_peak), daemon=True)
    sampler.start()
    out_lines: list[str] = []
    err_lines: list[str] = []
    readers = [threading.Thread(target=lambda s=s, b=b: b.extend(s), daemon=True)
               for s, b in ((process.stdout, out_lines), (process.stderr, err_lines))]
    for reader in readers:
        reader.start()
    deadline = started + timeout_s
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            os.killpg(process.pid, 9)
        time.sleep(0.05)
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    for reader in readers:
        reader.join(timeout=5)
    process.returncode = os.waitstatus_to_exitcode(status)
    _reap_session(process.pid)
    result = next((json.loads(line[len(RESULT_PREFIX):]) for line in out_lines if line.startswith(RESULT_PREFIX)), {})
    return Measured(process.returncode, wall, peak[0] / 1024, usage.ru_maxrss / 1024, result,
                    "".join(err_lines[-25:]), dict(sorted(at_peak.items(), key=lambda item: -item[1])))


def _reap_session(sid: int) -> None:
    """Ray or Daft processes the contender left behind in its session (ours to end)."""
    try:
        os.killpg(sid, 15)
    except ProcessLookupError:
        pass


def report_result(**values) -> None:
    """Called inside a contender process: hand the measured figures to the parent."""
    print(RESULT_PREFIX + json.dumps(values), flush=True)


# -- the results file -----------------------------------------------------------------------

def write_section(name: str, body: str) -> None:
    """Replace (or append) the section between this script's markers in peers.md."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = RESULTS.read_text() if RESULTS.exists() else (
        "# Peer benchmarks\n\nkb-ray next to other tools doing the same job, on the same data, in one run per "
        "script. Scripts and caveats: `benchmarks/peers/README.md`.\n")
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text)


def header_lines(title: str, command: str, load_start: str, load_end: str, packages: tuple[str, ...]) -> str:
    noisy = max(float(load_start.split()[0]), float(load_end.split()[0])) > 1
    return "\n".join([
        f"## {title}", "",
        f"- date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; kb-ray {kb_ray_revision()}",
        f"- machine: {machine_line()}",
        f"- versions: {versions(*packages)}",
        f"- command: `{command}`",
        f"- load average (1/5/15 min) at start: {load_start}; at end: {load_end}"
        + (" — **above 1: other work shared the CPUs, figures are noisy; read the ratios, not the absolutes**"
           if noisy else ""),
        "", "",
    ])
