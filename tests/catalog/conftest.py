"""Fixtures: real Delta catalogs in ``tmp_path`` and a small populated knowledge base."""

from __future__ import annotations

import pytest
from catalog_rows import populate

from kb_ray.catalog import DeltaCatalog


@pytest.fixture
def catalog(tmp_path) -> DeltaCatalog:
    return DeltaCatalog.open(str(tmp_path / "kb"))


@pytest.fixture
def populated_catalog(catalog) -> DeltaCatalog:
    return populate(catalog)
