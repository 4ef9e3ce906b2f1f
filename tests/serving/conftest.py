from tests.index_fixtures import golden_kb  # noqa: F401  (pytest fixture)
