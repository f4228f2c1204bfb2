"""Shared core of the paragraph-chunking RAG study.

Every strategy (paragraph, fixed-size, blank-line) goes through the same PDF text layer, chunk records,
knowledge base, embedding model, prompt and generator; only the splitter and its parameters differ.
Importing this package is cheap: heavy libraries (torch, langchain, chromadb) load lazily where used.
"""

__version__ = "0.1.0"
