"""API keys, roles and tenant scope of the search service (Ray-free; docs/auth.md)."""
