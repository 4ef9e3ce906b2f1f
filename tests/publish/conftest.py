"""A real Postgres with pgvector for the publication tests (tests/publish/postgres_server.py):
one server per session, one fresh database per test; and the golden catalog of tests/index."""

from __future__ import annotations

import itertools
import os

import pytest

from tests.index_fixtures import golden_kb, text_embedder  # noqa: F401  (pytest fixtures)
from tests.publish.postgres_server import LocalPostgres, find_postgres

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server():
    binaries, why = find_postgres()
    if binaries is None:
        if os.environ.get("KB_RAY_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"KB_RAY_REQUIRE_POSTGRES=1 but {why}")
        pytest.skip(why)
    server = LocalPostgres(binaries).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def new_database(postgres_server):
    """``new_database()`` → the DSN of a new empty database on the session's server."""
    import psycopg

    def create() -> str:
        name = f"kb_test_{os.getpid()}_{next(_databases)}"
        with psycopg.connect(postgres_server.dsn, autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return postgres_server.dsn.rsplit("/", 1)[0] + f"/{name}"

    return create


@pytest.fixture
def postgres_dsn(new_database) -> str:
    return new_database()
