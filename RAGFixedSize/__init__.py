"""Fixed-size strategy: RecursiveCharacterTextSplitter parents (paper: 800 characters, 50 overlap)."""

from .strategy import SPEC, MyKnowledgeBase

__all__ = ["SPEC", "MyKnowledgeBase"]
