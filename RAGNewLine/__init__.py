"""Blank-line strategy: parents split at blank lines (`\\n\\n`), no size limit."""

from .strategy import SPEC, BlankLineSplitter

__all__ = ["SPEC", "BlankLineSplitter"]
