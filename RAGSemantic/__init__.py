"""Semantic strategy: sentences grouped where the embedding similarity of neighbours drops, 100-800 characters."""

from .strategy import SPEC

__all__ = ["SPEC"]
