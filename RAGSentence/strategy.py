"""What differs for the sentence strategy: whole sentences packed into size-bounded parents.

Sentences come from `ragstudy.text.sentences` (NLTK Punkt with an explicit Italian abbreviation list; the module says
why not pysbd or sentencex). They are packed greedily into parents of at most `chunk_size` characters (800, like
the fixed-size baseline's parents), never cutting inside a sentence; a "sentence" longer than `chunk_size` (in PDFs
a table or list without full stops) is cut at line breaks, then between words. Child windows 200 / overlap 0 and
k=4, as for the other baselines. chonkie's SentenceChunker was not used: it splits at ". " and would cut after
"art." and "D.Lgs."; LangChain has no sentence packer that keeps offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_text_splitters import TextSplitter

from ragstudy.registry import ChunkerContext, register_strategy
from ragstudy.text.chunks import SpanChunker

from ragstudy.text.sentences import ItalianSentenceSplitter, SentenceUnits, Span, pack


@dataclass(frozen=True)
class SentenceParams:
    """Parents of whole sentences up to `chunk_size` characters; consecutive parents share `overlap_sentences`."""

    chunk_size: int = 800
    overlap_sentences: int = 0

    def __post_init__(self) -> None:
        if self.chunk_size < 20:
            raise ValueError(f"chunk_size must be at least 20 characters, got {self.chunk_size}")
        if not 0 <= self.overlap_sentences <= 10:
            raise ValueError(f"overlap_sentences must be between 0 and 10, got {self.overlap_sentences}")


class SentenceTextSplitter(TextSplitter):
    """The sentence packer as a LangChain TextSplitter (usable directly as a ParentDocumentRetriever splitter)."""

    def __init__(self, chunk_size: int = 800, overlap_sentences: int = 0) -> None:
        super().__init__(chunk_size=chunk_size, chunk_overlap=0)
        self._units = SentenceUnits(ItalianSentenceSplitter(), chunk_size)
        self._overlap_sentences = overlap_sentences

    def spans(self, text: str) -> list[Span]:
        return pack(self._units(text), self._chunk_size, self._overlap_sentences)

    def split_text(self, text: str) -> list[str]:
        return [text[start:end] for start, end in self.spans(text)]



def make_chunker(config: SentenceParams, context: ChunkerContext) -> SpanChunker:
    return SpanChunker(SentenceTextSplitter(config.chunk_size, config.overlap_sentences))


# parents: whole sentences up to 800 characters (the fixed-size parents' size); child windows 200/0, k=4;
# colour Okabe–Ito reddish purple
SPEC = register_strategy("sentence", make_chunker, SentenceParams, display_name="Sentence", color="#CC79A7", order=4,
                         description="whole Italian sentences packed up to 800 characters")
