"""Shared core of the paragraph-chunking RAG study.

Every registered strategy (the paper's paragraph, fixed-size and blank-line, plus token, sentence, semantic and
markdown; see `ragstudy.registry`) goes through the same chunk records, knowledge base, embedding model, prompt and
generator; only the chunker and its parameters differ.
Importing this package is cheap: heavy libraries (torch, langchain, chromadb) load lazily where used.
"""

__version__ = "0.1.0"
