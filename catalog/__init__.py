"""The catalog contract: Delta table schemas and their version (``schemas.py``), DuckDB
views (``views.sql``) and ready analytics queries (``queries/*.sql``).

Declarations only; the code that uses them lives in ``kb_ray.catalog``.
"""
