"""Token strategy: windows of 200 embedding-model tokens with 20 tokens of overlap."""

from .strategy import SPEC

__all__ = ["SPEC"]
