"""Answering: the paper's chain, the LLM axis of the answer comparison, the paper's public API."""
