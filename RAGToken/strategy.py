"""What differs for the token strategy: parents of N tokens of the study's embedding-model tokenizer, with overlap.

Windows are counted with the embedding model's own (fast) tokenizer, so a parent never exceeds what the embedder
reads (all-MiniLM-L6-v2 reads 256 tokens, multilingual-e5-large-instruct 512; a larger `chunk_size` is refused).
Spans come from the tokenizer's offset mapping, so each parent is an exact slice of the text layer. LangChain's
`TokenTextSplitter`/`SentenceTransformersTokenTextSplitter` and chonkie's `TokenChunker` were not used: they decode
token ids back to text, which for an uncased WordPiece model lower-cases and drops accents ("Perché" -> "perche"),
so chunks would no longer be slices of the source. Windows start and end at word boundaries where possible
(`word_ids`), so re-tokenising a parent gives the same tokens. Defaults: 200 tokens (≈ the 800-character
fixed-size parents on Italian with MiniLM), overlap 20; child windows 200 characters / overlap 0, k=4.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstudy.errors import StudyInputError
from ragstudy.params import WindowParams
from ragstudy.registry import ChunkerContext, register_strategy
from ragstudy.text.chunks import SpanChunker

Span = tuple[int, int]
_UNBOUNDED = 1_000_000  # transformers' stand-in for "no limit" is ~1e30; anything above this means "unknown"


@dataclass(frozen=True)
class TokenParams(WindowParams):
    """Windows of `chunk_size` embedding-model tokens; consecutive windows share `chunk_overlap` tokens."""

    chunk_size: int = 200
    chunk_overlap: int = 20


def embedder_token_limit(tokenizer: Any) -> int | None:
    """Tokens of text the embedding model reads (its max_seq_length less special tokens), or None if unknown."""
    limits = [tokenizer.model_max_length] if 0 < tokenizer.model_max_length < _UNBOUNDED else []
    config = Path(str(tokenizer.name_or_path)) / "sentence_bert_config.json"
    if config.is_file():  # sentence-transformers truncates at max_seq_length, often below the tokenizer's limit
        max_seq_length = json.loads(config.read_text(encoding="utf-8")).get("max_seq_length")
        if isinstance(max_seq_length, int) and max_seq_length > 0:
            limits.append(max_seq_length)
    return min(limits) - tokenizer.num_special_tokens_to_add() if limits else None


@dataclass
class TokenWindowSplitter:
    """Token windows of a text as character spans, from a fast tokenizer's offset mapping."""

    tokenizer: Any
    chunk_size: int
    chunk_overlap: int = 0

    def spans(self, text: str) -> list[Span]:
        encoding = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        offsets = encoding["offset_mapping"]
        words = encoding.word_ids() if hasattr(encoding, "word_ids") else [None] * len(offsets)
        keep = [i for i, (start, end) in enumerate(offsets) if end > start]
        offsets, words = [offsets[i] for i in keep], [words[i] for i in keep]
        n = len(offsets)

        def word_start(i: int) -> int:  # first token of the word holding token i
            while i > 0 and words[i] is not None and words[i - 1] == words[i]:
                i -= 1
            return i

        spans: list[Span] = []
        i = 0
        while i < n:
            j = min(i + self.chunk_size, n)
            if j < n and word_start(j) > i:  # don't end inside a word
                j = word_start(j)
            start, end = offsets[i][0], offsets[j - 1][1]
            while start < end and text[start].isspace():  # SentencePiece offsets may include the leading space
                start += 1
            spans.append((start, end))
            if j == n:
                break
            nxt = j - self.chunk_overlap
            nxt = word_start(nxt) if word_start(nxt) > i else nxt
            i = max(nxt, i + 1)
        return spans

    def split_text(self, text: str) -> list[str]:
        return [text[start:end] for start, end in self.spans(text)]


def make_chunker(config: TokenParams, context: ChunkerContext) -> SpanChunker:
    tokenizer = context.tokenizer()
    if not getattr(tokenizer, "is_fast", False):
        raise StudyInputError(f"the token strategy needs a fast tokenizer (offset mapping); the embedding model's "
                              f"tokenizer {type(tokenizer).__name__} is not one")
    limit = embedder_token_limit(tokenizer)
    if limit is not None and config.chunk_size > limit:
        raise StudyInputError(
            f"--set token.chunk_size={config.chunk_size}: the embedding model {context.embedding_label or ''} reads "
            f"at most {limit} tokens of text; choose chunk_size <= {limit}")
    return SpanChunker(TokenWindowSplitter(tokenizer, config.chunk_size, config.chunk_overlap))


# parents: 200 embedding-model tokens, overlap 20; child windows 200 characters / 0, k=4 (as the baselines);
# colour Okabe–Ito vermillion
SPEC = register_strategy("token", make_chunker, TokenParams, display_name="Token", color="#D55E00", order=3,
                         description="windows of 200 embedding-model tokens, overlap 20", needs_tokenizer=True)
