"""kb-ray: distributed batch indexing of documents into a provenance-preserving knowledge base."""

__version__ = "0.1.0"
