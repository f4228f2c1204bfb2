"""Sentence strategy: Italian sentences (Punkt + an abbreviation list) packed into chunks of up to 800 characters."""

from .strategy import SPEC

__all__ = ["SPEC"]
