"""Enrichers: derived text about a document's parts, e.g. VLM captions of figure crops."""
