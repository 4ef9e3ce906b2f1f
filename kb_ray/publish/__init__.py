"""Publishing an index generation outside kb-ray: Postgres with pgvector (docs/publish.md)."""
