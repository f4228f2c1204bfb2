"""Markdown strategy: PyMuPDF4LLM Markdown split at headings, sections over 800 characters split again."""

from .strategy import SPEC

__all__ = ["SPEC"]
