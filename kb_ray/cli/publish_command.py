"""``kb-ray publish postgres``: one index generation → Postgres (kb_ray/publish/postgres.py, docs/publish.md)."""

from __future__ import annotations

import argparse
import json
import os

from kb_ray.cli.common import config_from_args

DSN_ENV = "KB_RAY_POSTGRES_DSN"


def register(commands: argparse._SubParsersAction) -> None:
    from kb_ray.cli import add_config_arguments

    publish = commands.add_parser("publish", help="publish an index generation outside kb-ray (docs/publish.md)")
    publish.add_argument("target", choices=["postgres"])
    publish.add_argument("--dsn", default=None,
                         help=f"libpq connection string or URI (default: ${DSN_ENV}; keep passwords there)")
    publish.add_argument("--generation", default=None, help="generation id (default: the live one)")
    publish.add_argument("--drop-old", action="store_true",
                         help="drop the tables of every other published generation")
    publish.add_argument("--batch-rows", type=int, default=2000, help="rows per COPY batch")
    publish.add_argument("--json", action="store_true")
    add_config_arguments(publish)
    publish.set_defaults(handler=run_publish)


def run_publish(args: argparse.Namespace) -> int:
    from kb_ray.publish.postgres import PostgresPublisher

    dsn = args.dsn or os.environ.get(DSN_ENV)
    if not dsn:
        print(f"kb-ray publish postgres: pass --dsn or set {DSN_ENV}")
        return 2
    publisher = PostgresPublisher(config_from_args(args), dsn, batch_rows=args.batch_rows)
    result = publisher.publish(args.generation, drop_old=args.drop_old)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    if result.action == "unchanged":
        print(f"{result.generation_id} is already published as {result.table} ({result.rows} rows, "
              f"{result.passages} passage vectors): nothing to do")
    elif result.action == "updated":
        print(f"{result.table}: {result.deleted_rows} rows of tombstoned versions deleted, "
              f"{result.copied_rows} copied ({result.rows} rows, {result.passages} passage vectors)")
    else:
        print(f"published {result.generation_id} (segment {result.segment}) as {result.table}: "
              f"{result.rows} rows and {result.passages} passage vectors in {result.seconds:.1f} s "
              f"({result.rows_per_s:.0f} rows/s)")
    if result.switched:
        print(f"kb_chunks and kb_passages now show {result.table} and its passage table")
    for table in result.dropped:
        print(f"dropped {table}")
    return 0
