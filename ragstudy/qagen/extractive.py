"""A deterministic, LLM-free candidate writer: quotes the first sentence of 60-300 characters of each passage and
asks what the document says about two of its longer words. It is a baseline and a stand-in where no usable LLM
runs (tests, the validity benchmark on CPU): its questions are templates, not the questions a user would ask, and
every set it writes says so (its model name, EXTRACTIVE_MODEL, is in the sidecar and the report). It reads the
passage back out of the prompt (`prompt.passage_parts`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ragstudy.qagen.prompt import passage_parts

EXTRACTIVE_MODEL = "extractive-template-v1"
_SENTENCE_END = re.compile(r"(?<=[.;:])\s+")
_LONG_WORD = re.compile(r"[^\W\d_]{7,}")


class ExtractiveGenerator:
    concurrency = 8
    answers_questions = False  # make-qa's round trip (run.round_trip) does not ask it: it only writes templates

    def __init__(self) -> None:
        self.generated = 0
        self.cached = 0

    def write(self, text: str) -> str:
        """The JSON candidate for a passage text (prose, which the filters drop, when it has no usable sentence)."""
        sentences = [s for s in _SENTENCE_END.split(text) if 60 <= len(s) <= 300]
        if not sentences:
            return "Non saprei."
        sentence = sentences[0]
        words = _LONG_WORD.findall(sentence)[:2] or ["testo"]
        return json.dumps({"domanda": f"Cosa viene spiegato su {' e '.join(words)}?",
                           "risposta": " ".join(sentence.split()[:8]), "evidenza": sentence}, ensure_ascii=False)

    def generate_many(self, prompts: Sequence[str], params=None, desc: str = "") -> list[str]:
        self.generated += len(prompts)
        return [self.write("\n".join(passage_parts(prompt))) for prompt in prompts]
