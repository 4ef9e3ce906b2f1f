"""The Ray Serve query service under steady load, a searcher replica killed mid-load, a
generation switch mid-load, and one search client beside 50 stalled clients (loopback HTTP, the
golden catalog).

    .venv/bin/python benchmarks/serve_load.py [--clients 8] [--seconds 60] [--kb-root PATH]
    .venv/bin/python benchmarks/serve_load.py --only stalled-clients [--set serve.KEY=VALUE ...]

Without ``--kb-root`` it ingests golden/sources into a temporary catalog first (as the tests
do); with one it copies that catalog (without its indexes) so the generation switch never
touches it. Each load scenario is ``--clients`` threads × ``--seconds`` of mixed ``/v1/search``
requests (kb_ray/serving/loadtest.py: golden/queries.jsonl queries, modes hybrid/dense/lexical
in turn, every 5th with a mime filter). The faults happen ``--fault-at`` seconds in. The
stalled-clients scenario is one client searching back to back, alone and then beside
``--stalled`` clients that each declared a longer body than they send (half ``/v1/search``, half
``/v1/documents``, each from its own loopback address, so the per-client limit does not refuse
them), for as long as they stay stalled (``serve.body_read_timeout_s`` less 2 s, at most
``--seconds``). ``--set`` overrides the service's config (e.g. the edge limits of before issue #37:
``serve.ingress_max_ongoing_requests=5``). Writes benchmarks/results/<--name>.md and .json.
``scenario_rows`` is importable (benchmarks/faults.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

import httpx  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kb_ray.config import KbConfig, load_config  # noqa: E402
from kb_ray.serving import loadtest, replicas  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
SEARCHER = "ShardSearcher"


def golden_catalog(*, kb_root: str | None, workdir: Path, searchers: int, overrides: tuple[str, ...] = ()
                   ) -> KbConfig:
    """Config over a private copy of ``kb_root``, or over golden/sources ingested into ``workdir``."""
    overrides = ["embedding.num_threads=1", f"serve.searcher_replicas={searchers}", *overrides]
    target = workdir / "kb"
    if kb_root:
        shutil.copytree(kb_root, target, ignore=shutil.ignore_patterns("indexes"))
        return load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={target}", *overrides])
    from kb_ray.ingest.run import run_ingest

    config = load_config(REPO / "conf" / "local.yaml", overrides=[f"kb_root={target}", *overrides])
    report = run_ingest(config)
    if report.status != "succeeded":
        raise SystemExit(f"golden ingest failed: {report.to_dict()}")
    return config


def _row(scenario: str, result: loadtest.LoadResult, **extra: Any) -> dict[str, Any]:
    return {"scenario": scenario, "clients": result.clients, **result.stats().to_dict(),
            "load_average_1min_after": round(os.getloadavg()[0], 1), **extra,
            "failures": [asdict(r) for r in result.failures()[:20]]}


def _in_background(url: str, bodies: list[dict], clients: int, seconds: float) -> tuple[threading.Thread, dict]:
    holder: dict[str, loadtest.LoadResult] = {}
    thread = threading.Thread(target=lambda: holder.setdefault("result", loadtest.run_load(
        url=url, bodies=bodies, clients=clients, seconds=seconds)))
    thread.start()
    return thread, holder


def replica_kill_row(*, url: str, bodies: list[dict], clients: int, seconds: float, fault_at_s: float,
                     searchers: int) -> dict[str, Any]:
    thread, holder = _in_background(url, bodies, clients, seconds)
    time.sleep(fault_at_s)
    killed_at = time.perf_counter()
    killed = replicas.kill_one_replica(deployment=SEARCHER)
    replaced_s = replicas.wait_for_replicas(deployment=SEARCHER, count=searchers, killed=killed, timeout_s=120)
    thread.join()
    result = holder["result"]
    kill_s = killed_at - result.began
    failures = result.failures()
    last = max((r.started_s + r.latency_ms / 1000 for r in failures), default=None)
    return _row("replica kill", result, fault_at_s=round(kill_s, 2), replica_replaced_s=round(replaced_s, 2),
                errors_until_s=None if last is None else round(last - kill_s, 2),
                after_fault=result.stats(start_s=kill_s).to_dict())


def generation_switch_row(*, config: KbConfig, url: str, bodies: list[dict], clients: int, seconds: float,
                          fault_at_s: float) -> dict[str, Any]:
    from kb_ray.index import build_index

    before = httpx.post(f"{url}/v1/search", json={"query": "pump", "k": 1}, timeout=60).json()["generation"]
    thread, holder = _in_background(url, bodies, clients, seconds)
    time.sleep(fault_at_s)
    started = time.perf_counter()
    rebuilt = build_index(config.model_copy(update={"index": config.index.model_copy(update={"shards": 3})}))
    built_s = time.perf_counter() - started
    seen = before
    while seen != rebuilt.generation_id and time.perf_counter() - started < seconds:
        seen = httpx.post(f"{url}/v1/search", json={"query": "pump", "k": 1}, timeout=60).json()["generation"]
    served_s = time.perf_counter() - started
    thread.join()
    result = holder["result"]
    return _row("generation switch", result, fault_at_s=round(started - result.began, 2),
                index_build_s=round(built_s, 2), new_generation_served_s=round(served_s, 2),
                switched=seen == rebuilt.generation_id, after_fault=result.stats(start_s=started - result.began).to_dict())


def stalled_clients_row(*, config: KbConfig, url: str, port: int, bodies: list[dict], seconds: float,
                        stalled: int) -> dict[str, Any]:
    """One client searching back to back, alone and then beside ``stalled`` clients whose bodies never
    arrive; what the stalled ones were answered, and when."""
    window_s = min(seconds, max(config.serve.body_read_timeout_s - 2.0, 1.0))  # while they are all stalled
    alone = loadtest.run_load(url=url, bodies=bodies, clients=1, seconds=window_s)
    opened = time.monotonic()
    socks = [loadtest.open_stalled("127.0.0.1", port, "/v1/search" if n % 2 else "/v1/documents",
                                   source=f"127.0.{1 + n // 250}.{1 + n % 250}") for n in range(stalled)]
    time.sleep(0.5)  # each one is in the ingress, waiting for the rest of its body
    beside = loadtest.run_load(url=url, bodies=bodies, clients=1, seconds=window_s)
    wait_s = min(config.serve.body_read_timeout_s, config.serve.upload_read_timeout_s,
                 config.serve.body_idle_timeout_s) + 30.0
    replies = loadtest.stalled_replies(socks, since=opened, timeout_s=min(wait_s, 90.0))
    statuses = Counter(reply.status_line.split(" ")[1] if reply.status_line else "none" for reply in replies)
    answered = [reply.first_bytes_s for reply in replies if reply.status_line]
    alone_p50, beside_p50 = alone.stats().p50_ms, beside.stats().p50_ms
    return _row("stalled clients", beside, stalled=stalled, alone=alone.stats().to_dict(),
                p50_ratio=None if not alone_p50 or beside_p50 is None else round(beside_p50 / alone_p50, 2),
                stalled_statuses=dict(statuses), stalled_closed=sum(reply.closed for reply in replies),
                stalled_answered_s=[round(min(answered), 1), round(max(answered), 1)] if answered else None,
                edge={key: getattr(config.serve, key) for key in (
                    "ingress_max_ongoing_requests", "body_read_timeout_s", "body_idle_timeout_s",
                    "upload_read_timeout_s", "max_requests_per_client")})


def scenario_rows(config: KbConfig, *, url: str, clients: int, seconds: float, fault_at_s: float,
                  only: str = "all", port: int = 8795, stalled: int = 50) -> list[dict]:
    """Steady load, then a replica kill, then a generation switch, then stalled clients, on a running
    service (``only="stalled-clients"``: that one alone)."""
    bodies = loadtest.search_mix(queries=loadtest.golden_queries(REPO / "golden" / "queries.jsonl"))
    loadtest.run_load(url=url, bodies=bodies, clients=clients, seconds=min(5.0, seconds))  # warm-up, not counted
    rows = []
    if only == "all":
        rows.append(_row("steady", loadtest.run_load(url=url, bodies=bodies, clients=clients, seconds=seconds)))
        rows.append(replica_kill_row(url=url, bodies=bodies, clients=clients, seconds=seconds, fault_at_s=fault_at_s,
                                     searchers=config.serve.searcher_replicas))
        rows.append(generation_switch_row(config=config, url=url, bodies=bodies, clients=clients, seconds=seconds,
                                          fault_at_s=fault_at_s))
    rows.append(stalled_clients_row(config=config, url=url, port=port, bodies=bodies, seconds=seconds,
                                    stalled=stalled))
    return rows


def run(*, clients: int = 8, seconds: float = 60.0, kb_root: str | None = None, fault_at_s: float = 15.0,
        searchers: int = 2, port: int = 8795, only: str = "all", stalled: int = 50,
        overrides: tuple[str, ...] = ()) -> list[dict]:
    """Start Ray and the service on 127.0.0.1:``port``, run the scenarios, stop; the rows."""
    import ray

    from kb_ray.index import build_index
    from kb_ray.serving.app import start_service, stop_service

    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}})
    try:
        with tempfile.TemporaryDirectory(prefix="serve-load-") as workdir:
            config = golden_catalog(kb_root=kb_root, workdir=Path(workdir), searchers=searchers, overrides=overrides)
            build_index(config)
            start_service(config, port=port)
            try:
                return scenario_rows(config, url=f"http://127.0.0.1:{port}", clients=clients, seconds=seconds,
                                     fault_at_s=fault_at_s, only=only, port=port, stalled=stalled)
            finally:
                stop_service()
    finally:
        ray.shutdown()


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def markdown(rows: list[dict], *, args: argparse.Namespace) -> str:
    import ray

    lines = [f"# Serve under load and faults ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)", "",
             f"Machine: {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python "
             f"{platform.python_version()}, ray {ray.__version__}. **Shared** with other jobs while it ran "
             "(`load avg`: the 1-minute load average at the end of each row): absolute figures are low and noisy; "
             "the steady row is the baseline of the fault rows, measured minutes apart in the same run.", "",
             f"`benchmarks/serve_load.py --clients {args.clients} --seconds {args.seconds:g} --searchers {args.searchers}"
             f"{command_tail(args)}`: golden catalog, "
             f"{args.searchers} ShardSearcher replicas, 1 QueryEmbedder, no reranker; mixed `/v1/search` "
             "(hybrid/dense/lexical in turn, every 5th request with a mime filter, k=5). Faults at "
             f"{args.fault_at:g} s. Latency percentiles are over successful requests.", "",
             "| scenario | requests | errors | QPS | p50 ms | p95 ms | p99 ms | load avg | fault at s | recovery |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in rows:
        lines.append(f"| {row['scenario']} | {row['requests']} | {row['errors']} {row['errors_by_kind'] or ''} | "
                     f"{row['qps']:.2f} | {_ms(row['p50_ms'])} | {_ms(row['p95_ms'])} | {_ms(row['p99_ms'])} | "
                     f"{row['load_average_1min_after']} | "
                     f"{row.get('fault_at_s', '–')} | {recovery_text(row)} |")
    return "\n".join(lines) + "\n"


def command_tail(args: argparse.Namespace) -> str:
    tail = "" if args.only == "all" else f" --only {args.only}"
    tail += "" if args.stalled == 50 else f" --stalled {args.stalled}"
    return tail + "".join(f" --set {item}" for item in args.set)


def recovery_text(row: dict) -> str:
    if row["scenario"] == "replica kill":
        until = row["errors_until_s"]
        return (f"replacement replica RUNNING after {row['replica_replaced_s']} s; "
                + ("no failed request" if until is None else f"last failed request ended {until} s after the kill"))
    if row["scenario"] == "stalled clients":
        alone, answered = row["alone"], row["stalled_answered_s"]
        statuses = ", ".join(f"{count} × {status}" for status, count in sorted(row["stalled_statuses"].items()))
        when = "" if answered is None else f" after {answered[0]}-{answered[1]} s"
        ratio = "–" if row["p50_ratio"] is None else f"{row['p50_ratio']:.2f}"
        return (f"{row['stalled']} stalled bodies beside 1 search client (the figures are that client's); the "
                f"same client alone just before: {alone['requests']} requests, {alone['errors']} errors, p50 "
                f"{_ms(alone['p50_ms'])} ms; p50 beside / alone: {ratio}; the stalled got {statuses}{when}, "
                f"{row['stalled_closed']} closed by the service; "
                f"edge: {', '.join(f'{k}={v:g}' for k, v in row['edge'].items())}")
    if row["scenario"] == "generation switch":
        return (f"index rebuilt (3 shards) in {row['index_build_s']} s, new generation served "
                f"{row['new_generation_served_s']} s after the build began; switched: {row['switched']}")
    return "–"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--fault-at", type=float, default=15.0, help="seconds into the load when the fault happens")
    parser.add_argument("--searchers", type=int, default=2, help="ShardSearcher replicas")
    parser.add_argument("--kb-root", default=None, help="an ingested golden catalog (default: ingest one)")
    parser.add_argument("--port", type=int, default=8795)
    parser.add_argument("--name", default="serve_load", help="results file stem under benchmarks/results/")
    parser.add_argument("--only", choices=("all", "stalled-clients"), default="all", help="the scenarios to run")
    parser.add_argument("--stalled", type=int, default=50, help="stalled clients beside the search client")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override of the service, e.g. serve.ingress_max_ongoing_requests=5")
    args = parser.parse_args()
    rows = run(clients=args.clients, seconds=args.seconds, kb_root=args.kb_root, fault_at_s=args.fault_at,
               searchers=args.searchers, port=args.port, only=args.only, stalled=args.stalled,
               overrides=tuple(args.set))
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = markdown(rows, args=args)
    (RESULTS / f"{args.name}.md").write_text(text, encoding="utf-8")
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2) + "\n")
    print(text)


if __name__ == "__main__":
    main()
