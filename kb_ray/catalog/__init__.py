"""The catalog of record: Delta tables declared in ``catalog/schemas.py``.

* :class:`DeltaCatalog` — open/create the tables, append, commit worker-written files,
  merge, delete, read and time-travel.
* :mod:`kb_ray.catalog.sql` — read-only DuckDB sessions over every table and the ready
  queries of ``catalog/queries/``.
"""

from kb_ray.catalog.datafiles import DataFile
from kb_ray.catalog.delta import DeltaCatalog

__all__ = ["DataFile", "DeltaCatalog"]
