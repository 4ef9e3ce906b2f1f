"""``kb-ray watch``: ingest whenever the sources change, and keep the served index fresh
(kb_ray/ingest/watch.py, docs/watch.md). One line per ingest; Ctrl-C stops."""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    parser = commands.add_parser("watch", help="ingest on every settled change of the sources (local: file "
                                 "events; object stores: listing diffs) and refresh the served index")
    parser.add_argument("--source", action="append", default=[], metavar="PATH_OR_URI",
                        help="watch these sources instead of the configured ones (repeatable)")
    parser.add_argument("--sync", choices=["none", "incremental", "full"], default="full",
                        help="what each ingest does with files that vanished (default full: a file deleted "
                        "under a watched source leaves the knowledge base; documents of the collection "
                        "ingested from other sources are not touched; incremental or none: deleted files "
                        "stay searchable)")
    parser.add_argument("--for", dest="duration_s", type=float, default=None, metavar="SECONDS",
                        help="stop after this long (default: until Ctrl-C)")
    add_config_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kb_ray.cli.ingest_command import source_from_here
    from kb_ray.ingest.watch import watch_sources
    from kb_ray.runtime import start_ray, stop_ray

    overrides = list(args.overrides) + [f"ingest.sync={args.sync}"]
    if args.source:
        overrides.append("ingest.sources=" + json.dumps([source_from_here(source) for source in args.source]))
    args.overrides = overrides
    config = config_from_args(args)
    config.ingest.inline_max_docs = config.ingest.inline_max_docs or config.ingest.resident_inline_max_docs
    stop = threading.Event()
    if args.duration_s is not None:
        timer = threading.Timer(args.duration_s, stop.set)
        timer.daemon = True
        timer.start()
    print(f"watching {', '.join(config.ingest.source_uris)} -> {config.kb_root} (Ctrl-C stops)", flush=True)
    start_ray(config, verbose=args.verbose)  # one Ray instance for every ingest of this watch
    _stop_on_signals(stop)
    try:
        stats = watch_sources(config, ingest=lambda: ingest_once(config, verbose=args.verbose), stop=stop,
                              on_changes=lambda n, trigger: print(f"{time.strftime('%H:%M:%S')} {trigger}: "
                                                                  f"{n} changed paths", flush=True))
    finally:
        stop_ray()
    print(f"watch stopped: {stats.ingests} ingests ({', '.join(stats.triggers)}), {stats.events} file events",
          flush=True)
    return 0


def _stop_on_signals(stop: threading.Event) -> None:
    """The first Ctrl-C (or SIGTERM) lets the ingest in flight finish and stops the watch; a
    second one interrupts at once."""
    def request_stop(signum: int, _frame) -> None:
        print("stopping after the ingest in flight (Ctrl-C again to interrupt it)", flush=True)
        stop.set()
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, request_stop)


def ingest_once(config, *, verbose: bool) -> None:
    """One incremental ingest, then an index when none is live yet (later ingests refresh it
    with delta segments, ``index.auto_refresh``); one line of report."""
    from kb_ray.index import build_index
    from kb_ray.ingest.run import run_ingest

    report = run_ingest(config, verbose=verbose)
    d, refresh = report.documents, report.index_refresh or {}
    index = f"index {refresh.get('action', 'not refreshed')} (segment {refresh.get('segment')})"
    if config.index.auto_refresh and refresh.get("generation") is None:
        manifest = build_index(config)
        index = f"index built: generation {manifest.generation_id}, {manifest.rows} chunks"
    print(f"{time.strftime('%H:%M:%S')} ingest {report.run_id}: {report.status} in {report.seconds:.1f}s — new "
          f"{d['new']} changed {d['changed']} unchanged {d['unchanged']} deleted {d['deleted']} failed "
          f"{d['failed']}; {index}", flush=True)
