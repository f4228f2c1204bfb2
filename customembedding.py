"""CustomEmbedding: the one embedding model every strategy uses, as a LangChain `Embeddings`.

Wraps SentenceTransformer (model id or local folder), picks CUDA when present, normalises vectors, embeds
documents in batches, and adds e5-instruct's query prompt ("Instruct: ...\\nQuery: ...") when the model is an
e5-instruct model (passages are embedded without instruction, as that model card prescribes).
"""

from __future__ import annotations

import logging
from pathlib import Path

from langchain_core.embeddings import Embeddings

logger = logging.getLogger(__name__)

E5_INSTRUCT_TASK = "Given a web search query, retrieve relevant passages that answer the query"


def is_e5_instruct(model: str) -> bool:
    """True for intfloat/multilingual-e5-*-instruct (by id or by a local folder's name)."""
    name = Path(model).name.lower() if Path(model).exists() else model.lower()
    return "e5" in name and "instruct" in name


def resolve_device(device: str = "auto") -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class CustomEmbedding(Embeddings):
    """SentenceTransformer embeddings, normalised, batched, with e5-instruct query prompts."""

    def __init__(self, model_name_or_path: str, device: str = "auto", batch_size: int = 32,
                 query_instruction: str | None = None, model_id: str | None = None,
                 dtype: str = "float32") -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        self.model_name_or_path = str(model_name_or_path)
        self.dtype = dtype
        # what cache keys record: another dtype gives (slightly) other vectors, hence another collection
        base_id = model_id or self.model_name_or_path
        self.model_id = base_id if dtype == "float32" else f"{base_id}@{dtype}"
        self.device = resolve_device(device)
        self.batch_size = batch_size
        if query_instruction is None and is_e5_instruct(self.model_name_or_path):
            query_instruction = E5_INSTRUCT_TASK
        self.query_instruction = query_instruction
        try:
            self.model = SentenceTransformer(self.model_name_or_path, device=self.device,
                                             model_kwargs={"dtype": getattr(torch, dtype)})
        except OSError as exc:
            raise OSError(
                f"embedding model {self.model_name_or_path!r} could not be loaded ({exc}). Pass a local model "
                "folder (--embedding PATH) or make the model available in the Hugging Face cache."
            ) from exc
        self.texts_embedded = 0  # counts passages and queries encoded, for cache checks and benchmarks
        logger.info("embedding model %s on %s, %s (query instruction: %s)", self.model_id, self.device, dtype,
                    bool(self.query_instruction))

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        self.texts_embedded += len(texts)
        return vectors.astype("float32").tolist()

    def format_query(self, text: str) -> str:
        return f"Instruct: {self.query_instruction}\nQuery: {text}" if self.query_instruction else text

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages in batches of `batch_size`."""
        return self._encode(list(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._encode([self.format_query(text)])[0]
