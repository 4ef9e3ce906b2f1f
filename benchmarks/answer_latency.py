"""Answer and search latency on a real catalog: in process, then over HTTP to Ray Serve.

    .venv/bin/python benchmarks/answer_latency.py --kb-root KB [--dataset golden/queries.jsonl]
        [--queries 40] [--label NAME] [--out FILE.json] [--set KEY=VALUE ...]

``KB`` must hold a live index generation (``kb-ray build-index``). The first ``--queries``
questions of ``--dataset`` are asked in turn, each once per measurement after two warm-up
rounds: ``answer`` (``local_answerer(...).answer``, the embedded default: extractive, hybrid
evidence) and ``search`` (``HybridSearcher.search``, default mode and evidence) in the
driver, then ``POST /v1/search`` and ``POST /v1/answer`` on 127.0.0.1 (one client, the
default deployments of ``start_service``). The load average is printed before and after:
a figure taken with other work running is noise (2 CPUs). Compare two commits in one
sitting by checking ``kb_ray/`` out at each and running this script back to back (Ray's
workers import the installed package: ``PYTHONPATH`` reaches the driver only).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time
from pathlib import Path

from kb_ray.config import load_config


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 1),
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1), "n": len(ordered)}


def timed(call, items: list, *, warm_rounds: int = 2) -> list[float]:
    for item in items[:warm_rounds]:
        call(item)
    out = []
    for item in items:
        started = time.perf_counter()
        call(item)
        out.append((time.perf_counter() - started) * 1000)
    return out


def in_process(config, questions: list[str]) -> dict[str, list[float]]:
    from kb_ray.answer.local import local_answerer
    from kb_ray.search.searcher import HybridSearcher

    answerer = local_answerer(config)
    search = HybridSearcher.open(config)
    return {"answer": timed(lambda q: answerer.answer({"query": q}), questions),
            "search": timed(lambda q: search.search(q, k=10), questions)}


def over_http(config, questions: list[str]) -> dict[str, list[float]]:
    """Client-side milliseconds per request, and from each search response's ``timing_ms``
    where they went: ``query_embed`` (the ingress's call to the embedder deployment),
    ``total`` (the search inside the searcher replica) and ``total_service`` (the ingress,
    both calls included); the rest of the client's time is the proxy and HTTP."""
    import httpx

    from kb_ray.serving.app import start_service, stop_service

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start_service(config, port=port)
    base = f"http://127.0.0.1:{port}"
    timings: dict[str, list[float]] = {"service query_embed": [], "service searcher": [], "service ingress": []}
    try:
        with httpx.Client(timeout=120) as client:
            def post(path: str, question: str) -> None:
                response = client.post(f"{base}{path}", json={"query": question, "k": 10})
                response.raise_for_status()
                if path == "/v1/search":
                    timing = response.json()["timing_ms"]
                    timings["service query_embed"].append(timing["query_embed"])
                    timings["service searcher"].append(timing["total"])
                    timings["service ingress"].append(timing["total_service"])

            measured = {"http search": timed(lambda q: post("/v1/search", q), questions),
                        "http answer": timed(lambda q: post("/v1/answer", q), questions)}
            n = len(questions)
            return {**measured, **{name: values[-n:] for name, values in timings.items()}}
    finally:
        stop_service()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb-root", required=True)
    parser.add_argument("--dataset", default="golden/queries.jsonl")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default=None, help="JSON of the percentiles (default: print only)")
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    config = load_config(None, overrides=[f"kb_root={args.kb_root}", "answer.log=false", *args.overrides])
    rows = [json.loads(line) for line in Path(args.dataset).read_text().splitlines() if line.strip()]
    questions = [row["query"] for row in rows][:args.queries]
    load_before = os.getloadavg()[0]
    measured = in_process(config, questions)
    if not args.no_http:
        measured.update(over_http(config, questions))
    load_after = os.getloadavg()[0]
    summary = {"label": args.label, "kb_root": args.kb_root, "questions": len(questions),
               "load_before": round(load_before, 2), "load_after": round(load_after, 2),
               **{name: percentiles(values) for name, values in measured.items()}}
    print(json.dumps(summary))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
