"""Fixed-size strategy: RecursiveCharacterTextSplitter parents (paper: 800 characters, 50 overlap)."""

from .strategy import SPEC

__all__ = ["SPEC"]
