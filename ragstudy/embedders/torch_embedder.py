"""torch: the paper's backend, SentenceTransformer in torch, float32 or --embedding-dtype bfloat16/float16 (vectors
keyed by the dtype), CUDA when present."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragstudy.embedders import Embedder, register_embedder

if TYPE_CHECKING:
    import numpy as np


class SentenceTransformerEncoder:
    """The paper's encoder: SentenceTransformer in torch, float32 (or bfloat16/float16), batched, normalised."""

    def __init__(self, model_name_or_path: str, device: str = "auto", dtype: str = "float32",
                 batch_size: int = 32) -> None:
        import torch
        from customembedding import resolve_device
        from sentence_transformers import SentenceTransformer

        self.variant = dtype
        self.device = resolve_device(device)
        self.batch_size = batch_size
        try:
            self.model = SentenceTransformer(model_name_or_path, device=self.device,
                                             model_kwargs={"dtype": getattr(torch, dtype)})
        except OSError as exc:
            raise OSError(f"embedding model {model_name_or_path!r} could not be loaded ({exc}). Pass a local model "
                          "folder (--embedding PATH) or make the model available in the Hugging Face cache.") from exc

    def encode(self, texts: list[str]) -> "np.ndarray":
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)


@register_embedder
class TorchEmbedder(Embedder):
    name = "torch"
    description = "SentenceTransformer in torch (the paper's)"
    order = 0
    honours_dtype = True

    def variant(self) -> str:
        return self.config.embedding_dtype

    def make_encoder(self, path: str) -> SentenceTransformerEncoder:
        return SentenceTransformerEncoder(path, self.config.profile.device, self.config.embedding_dtype,
                                          self.config.embedding_batch_size)
