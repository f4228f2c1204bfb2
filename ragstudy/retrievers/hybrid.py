"""hybrid: a convex combination of min-max normalised dense and BM25 scores, at the parent level.

Each component scores a parent by its best child window, as it does alone; per question its parent scores are
min-max normalised (all equal: no information, 0 for every parent); fused = 0.5 dense + 0.5 BM25, ties to the better
dense score. The rule was fixed before any run was scored with it; why not reciprocal rank fusion:
docs/results-embedders.md (the hybrid retriever).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragstudy.retrievers import register_retriever
from ragstudy.retrievers.units import UnitRetriever

DENSE_WEIGHT = 0.5  # equal weights: fixed a priori (see the module docstring), never fitted to the scored data
RULE = "parent-minmax-convex-0.5-v1"  # names the rule in cache keys; change it when the rule changes


def best_per_parent(ranking: Iterable[tuple[int, float]], unit_parent: Sequence[str]) -> dict[str, float]:
    """Each parent's best unit score from (unit position, score) pairs (higher is better)."""
    best: dict[str, float] = {}
    for unit, score in ranking:  # a tie keeps the score first seen
        best[unit_parent[unit]] = max(best.get(unit_parent[unit], score), score)
    return best


def min_max(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores mapped linearly onto [0, 1]; all zero when they are all equal (no information)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= low:
        return dict.fromkeys(scores, 0.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def fuse_parents(dense: Mapping[str, float], lexical: Mapping[str, float], dense_weight: float = DENSE_WEIGHT
                 ) -> list[tuple[str, float]]:
    """(parent, fused score) best first: dense_weight * minmax(dense) + (1 - dense_weight) * minmax(lexical).
    A parent missing from one component gets 0 from it. Ties: the better dense score, then the parent id."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense weight must be in [0, 1], got {dense_weight}")
    dense_n, lexical_n = min_max(dense), min_max(lexical)
    fused = {parent: dense_weight * dense_n.get(parent, 0.0) + (1 - dense_weight) * lexical_n.get(parent, 0.0)
             for parent in {*dense, *lexical}}
    return sorted(fused.items(), key=lambda item: (-item[1], -dense_n.get(item[0], 0.0), item[0]))


@register_retriever("hybrid", unit="children", vectors=True, lexical=True, order=4)
class Hybrid(UnitRetriever):
    """dense and BM25 over child windows, each parent by its best window, fused by normalised scores"""

    def cache_key(self) -> str | None:
        return f"{self.lexical.key}/{RULE}"

    def rank(self, question: str, question_index: int, largest: int, measure: Any) -> list[Any]:
        """Parents by the fused score, deep enough to overfill `largest`; `in_k` marks as many of its first parents
        as the dense k best child windows belong to (the own-k budget of dense). Scores are negated fused scores."""
        from ragstudy.lexical import UnitRanked, fill_depth, paper_k_parents, parents_by_best_unit, to_retrieved

        owners = self.corpus.parents
        dense = self.dense_ranking(question)
        fused = fuse_parents(best_per_parent(dense, owners), best_per_parent(self.lexical.ranking(question), owners))
        best_unit = {item.parent: item.unit for item in parents_by_best_unit(dense, owners)}
        ranked = [UnitRanked(parent, score, best_unit[parent], rank) for rank, (parent, score) in enumerate(fused, 1)]
        count = len(paper_k_parents(dense, owners, self.inputs.stage.params.k))
        lengths = {pid: measure.length(info.contents) for pid, info in self.parents.items()}
        return to_retrieved(question_index, fill_depth(ranked, lengths, largest), self.parents,
                            {parent for parent, _ in fused[:count]})
