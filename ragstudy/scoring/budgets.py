"""Context budgets: their labels, how one is counted (`Measure`: characters, or tokens of the LLM's tokenizer) and
how a ranking fills one: whole parents in rank order while the total stays <= B, a first parent longer than B cut
at B; budget "k" is what the strategy's own k child windows retrieve, as the chain prompts with. Below the run
stages: ranking counts with it, ragstudy.scoring.budget_eval scores the packed contexts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ragstudy.errors import StudyInputError

if TYPE_CHECKING:
    from ragstudy.grid.records import RetrievedParent

PAPER_K_LABEL = "k"  # the budget label of "the parents the strategy's own k child windows retrieve"


def budget_labels(budgets: Sequence[int]) -> list[str]:
    """Budget labels in table order: the numeric budgets ascending, then "k"."""
    return [str(b) for b in sorted(set(budgets))] + [PAPER_K_LABEL]


@dataclass(frozen=True)
class Measure:
    """How a budget is counted: `length(text)` in the budget's unit and `cut(text, n)`, the longest prefix of
    `text` of at most n units."""

    unit: str
    length: Callable[[str], int]
    cut: Callable[[str, int], str]
    name: str = ""  # which tokenizer, for cache keys


CHARS = Measure("chars", len, lambda text, n: text[:n])


def token_measure(tokenizer) -> Measure:
    """Budgets in tokens of `tokenizer` (a transformers fast tokenizer: cuts use its character offsets)."""

    def length(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    def cut(text: str, n: int) -> str:
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        return text if len(offsets) <= n else text[:offsets[n - 1][1]] if n > 0 else ""

    return Measure("tokens", length, cut, str(getattr(tokenizer, "name_or_path", "")))


def llm_measure(config) -> Measure:
    """The budget measure of a StudyConfig: characters, or tokens of the study's LLM tokenizer (no weights)."""
    if config.budget_unit == "chars":
        return CHARS
    from transformers import AutoTokenizer

    from ragstudy.models import resolve_llm

    origin = config.origins.get("llm", "config")
    try:
        tokenizer = AutoTokenizer.from_pretrained(resolve_llm(config.profile.llm, origin))
    except OSError as exc:
        raise StudyInputError(f"budget_unit tokens needs the LLM's tokenizer ({config.profile.llm}, set by {origin}),"
                              f" which could not be loaded: {exc}") from exc
    tokenizer.model_max_length = 10 ** 9  # counting only
    return token_measure(tokenizer)


# ------------------------------------------------------------------------------------------------ packing

@dataclass(frozen=True)
class PackedContext:
    """What fills one budget: the included parents in rank order and their texts (the first one possibly cut)."""

    budget: str  # "500", …, or "k"
    parents: tuple[RetrievedParent, ...]
    texts: tuple[str, ...]
    used: int  # size in the budget's unit
    cut: bool = False  # the first parent was longer than the budget and was cut


def pack_budget(ranked: Sequence[RetrievedParent], budget: int, measure: Measure = CHARS) -> PackedContext:
    """Fill `budget` with whole parents in rank order while the total stays <= budget; stop at the first parent
    that does not fit. A first parent longer than the budget is cut at the budget."""
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    parents: list[RetrievedParent] = []
    used = 0
    for parent in sorted(ranked, key=lambda p: p.rank):
        size = measure.length(parent.contents)
        if used + size <= budget:
            parents.append(parent)
            used += size
            continue
        if not parents:
            text = measure.cut(parent.contents, budget)
            return PackedContext(str(budget), (parent,), (text,), measure.length(text), cut=True)
        break
    return PackedContext(str(budget), tuple(parents), tuple(p.contents for p in parents), used)


def pack_paper_k(ranked: Sequence[RetrievedParent], measure: Measure = CHARS) -> PackedContext:
    """The parents the strategy's own k child windows retrieve, whole, in rank order (what the chain prompts with)."""
    parents = tuple(p for p in sorted(ranked, key=lambda p: p.rank) if p.in_k)
    return PackedContext(PAPER_K_LABEL, parents, tuple(p.contents for p in parents),
                         sum(measure.length(p.contents) for p in parents))


def pack_all(ranked: Sequence[RetrievedParent], budgets: Sequence[int], measure: Measure = CHARS
             ) -> dict[str, PackedContext]:
    """Every budget's context, in `budget_labels` order."""
    packed = {str(b): pack_budget(ranked, b, measure) for b in sorted(set(budgets))}
    packed[PAPER_K_LABEL] = pack_paper_k(ranked, measure)
    return packed
