"""torch: the paper's backend, SentenceTransformer in torch (customembedding.SentenceTransformerEncoder), float32
or --embedding-dtype bfloat16/float16 (vectors keyed by the dtype), CUDA when present."""

from __future__ import annotations

from . import register_embedder

SPEC = register_embedder("torch", lambda config, path: None, lambda config: config.embedding_dtype, dtype=True,
                         order=0, description="SentenceTransformer in torch (the paper's)")
