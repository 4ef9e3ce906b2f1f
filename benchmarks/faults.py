"""The reliability report: ingest faults and the query service under load and faults.

    .venv/bin/python benchmarks/faults.py [--docs 24] [--clients 8] [--seconds 60] [--skip-serve]

Ingest scenarios (real local Ray, real Delta; a generated corpus of ``--docs`` text files and
one PDF; two documents per micro-batch). Each scenario injects its fault into a fresh catalog,
then reruns the same ingest as a person would, and compares the result with one clean ingest
of the same corpus: documents lost, rows duplicated (every table's keys), equal to the clean
catalog, ``verify --strict``, and the rerun's seconds (recovery). The serve scenarios come from
benchmarks/serve_load.py (steady load, a searcher replica killed, a generation switch, stalled clients).
Writes benchmarks/results/faults.md and faults.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "benchmarks"))

import serve_load  # noqa: E402

from kb_ray.catalog.delta import DeltaCatalog  # noqa: E402
from kb_ray.catalog.verify import verify_catalog  # noqa: E402
from kb_ray.ingest.run import run_ingest  # noqa: E402
from tests.ingest.corpus import SECTIONS, make_pdf  # noqa: E402
from tests.ingest.faults import (  # noqa: E402
    EMBED_ACTOR,
    PARSE_ACTOR,
    cli_ingest,
    failing_writes,
    kill_after_first_batch,
    kill_processes_titled,
    wait_until_gone,
)
from tests.ingest.helpers import ingest_config, state  # noqa: E402

CONFIG = REPO / "conf" / "local.yaml"
RESULTS = REPO / "benchmarks" / "results"


def make_corpus(root: Path, docs: int) -> Path:
    root.mkdir(parents=True)
    make_pdf(root / "pump.pdf", SECTIONS)
    for i in range(docs - 1):
        (root / f"note_{i:03d}.txt").write_text(f"Service note {i}\n\nValve V-{i} is checked every {i + 1} weeks. "
                                               f"Its seal kit is SK-{1000 + i}.\n")
    return root


def outcome(kb: Path, clean: dict, *, seconds: float | None) -> dict[str, Any]:
    """How the catalog after the fault and the rerun compares with the clean one."""
    now = state(kb)
    duplicated = sum(count - 1 for rows in now.values() for count in Counter(rows).values() if count > 1)
    return {"documents_lost": len(set(clean["documents"]) - set(now["documents"])), "rows_duplicated": duplicated,
            "equal_to_clean": now == clean, "verify_strict": verify_catalog(DeltaCatalog.open(str(kb))).ok(strict=True),
            "recovery_s": seconds}


def rerun(kb: Path, corpus: Path) -> float:
    started = time.perf_counter()
    run_ingest(ingest_config(kb, [corpus]))
    return time.perf_counter() - started


def failing_run(kb: Path, corpus: Path, **failure: Any) -> str:
    """Ingest under ``failing_writes(**failure)``; the error the run ended with."""
    with failing_writes(**failure):
        try:
            run_ingest(ingest_config(kb, [corpus]))
            return "none (the run did not fail)"
        except Exception as exc:  # noqa: BLE001 - recorded
            return f"{type(exc).__name__}: {exc}"[:120]


def crash_inside_batch(kb: Path, corpus: Path, clean: dict) -> dict[str, Any]:
    error = failing_run(kb, corpus, table="versions", from_batch=3, error=RuntimeError)
    return {"scenario": "crash between two table commits of micro-batch 3", "error_seen": error,
            **outcome(kb, clean, seconds=rerun(kb, corpus))}


def storage_failing(kb: Path, corpus: Path, clean: dict) -> dict[str, Any]:
    error = failing_run(kb, corpus, from_batch=3, error=OSError)
    visible_ok = verify_catalog(DeltaCatalog.open(str(kb))).ok()
    return {"scenario": "every Delta write fails from micro-batch 3 on", "error_seen": error,
            "after_failure_verify": visible_ok, **outcome(kb, clean, seconds=rerun(kb, corpus))}


def actors_killed(kb: Path, corpus: Path, clean: dict) -> dict[str, Any]:
    killed: list[str] = []
    started = time.perf_counter()
    report = run_ingest(ingest_config(kb, [corpus]), on_progress=lambda _: killed or killed.extend(
        kill_processes_titled(PARSE_ACTOR, EMBED_ACTOR)))
    return {"scenario": "parse and embed actors SIGKILLed after micro-batch 0",
            "error_seen": f"none; killed {sorted(set(killed))}; run {report.status}",
            **outcome(kb, clean, seconds=None), "run_s": round(time.perf_counter() - started, 1)}


def driver_killed(kb: Path, corpus: Path, clean: dict) -> dict[str, Any]:
    processes = kill_after_first_batch(cli_ingest(kb_root=kb, sources=[corpus], config=CONFIG))
    gone_at = time.perf_counter()
    survivors = wait_until_gone(processes, timeout_s=60)
    return {"scenario": "driver SIGKILLed after micro-batch 0", "error_seen": "killed",
            "ray_processes": len(processes), "left_after_s": round(time.perf_counter() - gone_at, 1),
            "processes_left": len(survivors), **outcome(kb, clean, seconds=rerun(kb, corpus))}


def concurrent_ingests(kb: Path, corpus: Path, clean: dict) -> dict[str, Any]:
    drivers = [cli_ingest(kb_root=kb, sources=[corpus], config=CONFIG) for _ in range(2)]
    started = time.perf_counter()
    codes = [driver.wait(timeout=1800) for driver in drivers]
    return {"scenario": "two ingests of the same sources at once (two drivers)", "error_seen": f"exit codes {codes}",
            **outcome(kb, clean, seconds=None), "run_s": round(time.perf_counter() - started, 1)}


INGEST_SCENARIOS = (crash_inside_batch, storage_failing, actors_killed, driver_killed, concurrent_ingests)


def ingest_rows(*, docs: int, workdir: Path) -> list[dict[str, Any]]:
    import ray

    from kb_ray.runtime import WORKER_ENV

    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": WORKER_ENV}, log_to_driver=False)
    corpus = make_corpus(workdir / "src", docs)
    started = time.perf_counter()
    run_ingest(ingest_config(workdir / "clean", [corpus]))
    clean = state(workdir / "clean")
    rows = [{"scenario": "clean ingest (reference)", "error_seen": "", "documents": len(clean["documents"]),
             "run_s": round(time.perf_counter() - started, 1)}]
    for scenario in INGEST_SCENARIOS:
        print(f"faults: {scenario.__name__} …", flush=True)
        rows.append(scenario(workdir / scenario.__name__, corpus, clean))
    ray.shutdown()
    return rows


def serve_rows(*, clients: int, seconds: float) -> list[dict[str, Any]]:
    return serve_load.run(clients=clients, seconds=seconds)


def markdown(ingest: list[dict], serve: list[dict], *, args: argparse.Namespace) -> str:
    lines = [f"# Reliability report ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)", "",
             f"`python benchmarks/faults.py --docs {args.docs} --clients {args.clients} --seconds {args.seconds}` on "
             f"{platform.node()} ({os.cpu_count()} CPUs; shared with other jobs while it ran: absolute seconds are "
             "loose, the lost/duplicated/equal columns are exact).", "",
             "## Ingest faults (each then rerun; compared with one clean ingest of the same corpus)", "",
             "| scenario | error seen | documents lost | rows duplicated | equal to clean | verify --strict | "
             "recovery (rerun) s | notes |", "| --- | --- | ---: | ---: | --- | --- | ---: | --- |"]
    for row in ingest:
        notes = ", ".join(f"{key} {row[key]}" for key in ("documents", "run_s", "ray_processes", "processes_left",
                                                         "left_after_s", "after_failure_verify") if key in row)
        recovery = "" if row.get("recovery_s") is None else f"{row['recovery_s']:.1f}"
        lines.append(f"| {row['scenario']} | {row['error_seen']} | {row.get('documents_lost', '')} | "
                     f"{row.get('rows_duplicated', '')} | {row.get('equal_to_clean', '')} | "
                     f"{row.get('verify_strict', '')} | {recovery} | {notes} |")
    if serve:
        source = "benchmarks/results/serve_load.json, measured earlier" if args.skip_serve else "this run"
        lines += ["", f"## Query service under load and faults (benchmarks/serve_load.py; {source})", "",
                  "| scenario | requests | errors | QPS | p50 ms | p95 ms | recovery |", "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        for row in serve:
            lines.append(f"| {row.get('scenario')} | {row.get('requests')} | {row.get('errors')} | "
                         f"{row.get('qps', 0):.2f} | {row.get('p50_ms') or 0:.0f} | {row.get('p95_ms') or 0:.0f} | "
                         f"{serve_load.recovery_text(row)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--skip-serve", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kb-faults-") as work:
        ingest = ingest_rows(docs=args.docs, workdir=Path(work))
    if args.skip_serve:  # the rows benchmarks/serve_load.py measured last, named as such in the report
        serve = json.loads((RESULTS / "serve_load.json").read_text())["rows"] if (RESULTS / "serve_load.json").exists() else []
    else:
        serve = serve_rows(clients=args.clients, seconds=args.seconds)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "faults.json").write_text(json.dumps({"ingest": ingest, "serve": serve}, indent=2, default=str))
    (RESULTS / "faults.md").write_text(markdown(ingest, serve, args=args))
    print(markdown(ingest, serve, args=args))


if __name__ == "__main__":
    main()
