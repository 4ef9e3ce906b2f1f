"""Catalog subcommands: ``sql``, ``status``, ``verify``, ``purge``, ``maintain``."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import sys

import pyarrow as pa

from kb_ray.cli.common import config_from_args


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    sql = commands.add_parser("sql", help="read-only SQL (DuckDB) over the catalog tables")
    sql.add_argument("query", nargs="?", help="SQL text; omit with --query NAME or --list")
    sql.add_argument("--query", dest="ready", metavar="NAME", help="run a ready query from catalog/queries/")
    sql.add_argument("--list", action="store_true", help="list the ready queries")
    sql.add_argument("--as-of", type=_point, default=None, metavar="VERSION|TIMESTAMP",
                     help="N: each table at Delta version N (or its latest when lower); an ISO-8601 time: "
                     "each table at its own version at that time")
    fmt = sql.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true")
    sql.set_defaults(handler=run_sql)
    for name, handler, text in (("status", run_status, "a short summary of the catalog"),
                                ("verify", run_verify, "check catalog invariants; exit 1 on violations"),
                                ("purge", run_purge, "delete tombstoned documents and unreferenced rows"),
                                ("maintain", run_maintain, "compact small files (optionally Z-order by key), "
                                 "checkpoint, vacuum what no index generation uses")):
        parser = commands.add_parser(name, help=text)
        parser.add_argument("--json", action="store_true")
        parser.set_defaults(handler=handler)
        add_config_arguments(parser)
    commands.choices["verify"].add_argument("--strict", action="store_true", help="residue counts as a violation")
    commands.choices["purge"].add_argument("--superseded", action="store_true",
                                           help="also delete versions no document points at")
    commands.choices["purge"].add_argument("--drop-embedder", metavar="FINGERPRINT", default=None,
                                           help="also delete every vector of this embedder (an old model after "
                                           "kb-ray reembed + index switch); refused for the live generation's")
    maintain = commands.choices["maintain"]
    maintain.add_argument("--retention-hours", type=int, default=168,
                          help="vacuum unreferenced files older than this (default 7 days)")
    maintain.add_argument("--no-vacuum", action="store_true", help="compact and checkpoint only")
    maintain.add_argument("--z-order", action="store_true",
                          help="rewrite each table clustered by its key columns (a full rewrite)")
    add_config_arguments(sql)


def _point(text: str):
    """``--as-of`` (sql and search): digits are a version, anything else an ISO-8601 timestamp."""
    from kb_ray.catalog.time_travel import parse_point
    from kb_ray.errors import CatalogError

    try:
        return parse_point(text)
    except CatalogError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _catalog(args: argparse.Namespace):
    from kb_ray.catalog.delta import DeltaCatalog

    config = config_from_args(args)
    return DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)


@contextlib.contextmanager
def _writer(args: argparse.Namespace, holder: str):
    """The catalog, opened under its writer lease (no ingest, purge or maintain at the same time)."""
    from kb_ray.catalog.lease import writer_lease

    catalog = _catalog(args)
    with writer_lease(catalog, config_from_args(args), holder=holder):
        yield catalog


def run_sql(args: argparse.Namespace) -> int:
    from kb_ray.catalog.sql import list_ready_queries, load_ready_query, run_query

    if args.list:
        print("\n".join(list_ready_queries()))
        return 0
    text = load_ready_query(args.ready) if args.ready else args.query
    if not text:
        print("kb-ray sql: give a query, --query NAME or --list", file=sys.stderr)
        return 2
    print_table(run_query(_catalog(args), text, as_of=args.as_of), as_json=args.json, as_csv=args.csv)
    return 0


def print_table(table: pa.Table, *, as_json: bool = False, as_csv: bool = False) -> None:
    rows = table.to_pylist()
    if as_json:
        print(json.dumps(rows, indent=2, default=str, ensure_ascii=False))
    elif as_csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=table.column_names)
        writer.writeheader()
        writer.writerows(rows)
    else:
        print(render_table(table))


def render_table(table: pa.Table, *, max_width: int = 60) -> str:
    header = table.column_names
    cells = [[_cell(value, max_width) for value in row.values()] for row in table.to_pylist()]
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in enumerate(header)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(row) for row in cells]
                     + [f"({len(cells)} rows)"])


def _cell(value, max_width: int) -> str:
    text = "" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


STATUS_SQL = """
SELECT (SELECT count(*) FROM active_documents) AS active_documents,
       (SELECT count(*) FROM documents WHERE active_version_id IS NULL) AS tombstoned,
       (SELECT count(*) FROM versions WHERE status = 'failed') AS failed_versions,
       (SELECT count(*) FROM active_chunks) AS active_chunks,
       (SELECT count(*) FROM embeddings) AS embeddings,
       (SELECT coalesce(sum(n_pages), 0) FROM active_versions) AS pages,
       (SELECT max(finished_at) FROM ingest_runs) AS last_run
"""


def run_status(args: argparse.Namespace) -> int:
    from kb_ray.catalog.sql import run_query

    catalog = _catalog(args)
    print_table(run_query(catalog, STATUS_SQL), as_json=args.json)
    if not args.json:
        print(f"kb_root: {catalog.kb_root}")
        print("table versions: " + ", ".join(f"{k}={v}" for k, v in catalog.table_versions().items()))
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from kb_ray.catalog.verify import verify_catalog
    from kb_ray.index.vector_layout import VectorLayout

    report = verify_catalog(_catalog(args), layout=VectorLayout.from_settings(config_from_args(args).index))
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.render())
    return 0 if report.ok(strict=args.strict) else 1


def run_purge(args: argparse.Namespace) -> int:
    from kb_ray.catalog.purge import purge
    from kb_ray.index.vector_layout import VectorLayout

    config = config_from_args(args)
    with _writer(args, "purge") as catalog:
        report = purge(catalog, superseded=args.superseded, drop_embedder=args.drop_embedder,
                       live_embedder=_live_embedder(config), layout=VectorLayout.from_settings(config.index))
    print(json.dumps(report.__dict__, indent=2) if args.json else report.render())
    return 0


def _live_embedder(config) -> str | None:
    from kb_ray.index import load_manifest, read_current

    live = read_current(config.kb_root, storage_options=config.storage_options)
    return load_manifest(config.kb_root, live, storage_options=config.storage_options).embedder_fp if live else None


def run_maintain(args: argparse.Namespace) -> int:
    from kb_ray.catalog.maintenance import maintain

    with _writer(args, "maintain") as catalog:
        report = maintain(catalog, retention_hours=args.retention_hours, vacuum=not args.no_vacuum,
                          z_order=args.z_order)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.render())
    return 0
