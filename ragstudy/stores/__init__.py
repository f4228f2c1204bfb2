"""Stores and caches: the knowledge base (Chroma and the parent store), verified cache files, vector checks."""
