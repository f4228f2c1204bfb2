"""One catalogue of every metric the scripts report: its group, meaning, direction, scale and aggregation.

Modelled on lm-evaluation-harness's `register_metric(higher_is_better=…, aggregation=…)`: a metric's facts are
declared once, here, and tables, sentences and the report read them from `get(name)` instead of keeping their own
lists or if-chains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Aggregation = Literal["mean", "corpus", "count", "ratio", "variance"]


@dataclass(frozen=True)
class MetricInfo:
    name: str
    group: str  # answers | intrinsic | retrieval | hope
    description: str
    higher_is_better: bool | None  # None: neither direction is better (a count, a length)
    scale: tuple[float, float] | None = (0.0, 1.0)  # None: unbounded
    aggregation: Aggregation = "mean"  # how per-item values become the reported number
    decimals: int = 3


_CATALOGUE: dict[str, MetricInfo] = {}


def register_metric(name: str, group: str, description: str, higher_is_better: bool | None,
                    scale: tuple[float, float] | None = (0.0, 1.0), aggregation: Aggregation = "mean",
                    decimals: int = 3) -> MetricInfo:
    info = MetricInfo(name, group, description, higher_is_better, scale, aggregation, decimals)
    existing = _CATALOGUE.get(name)
    if existing is not None and existing != info:
        raise ValueError(f"metric {name!r} is already registered differently: {existing}")
    _CATALOGUE[name] = info
    return info


def get(name: str) -> MetricInfo:
    try:
        return _CATALOGUE[name]
    except KeyError:
        raise KeyError(f"metric {name!r} is not in the catalogue; register it in Postprocessing/metric_catalogue.py"
                       ) from None


def in_group(group: str) -> list[MetricInfo]:
    """The group's metrics in registration order (the order tables show them)."""
    return [info for info in _CATALOGUE.values() if info.group == group]


def decimals(name: str) -> int:
    return _CATALOGUE[name].decimals if name in _CATALOGUE else 3


# -- answers vs the oracle (evaluation_metrics.py) ----------------------------------------------------------------
register_metric("BLEU", "answers", "sacrebleu sentence BLEU", True, (0.0, 100.0), decimals=2)
for _name, _what in (("ROUGE-1", "unigram"), ("ROUGE-2", "bigram"), ("ROUGE-L", "longest common subsequence"),
                     ("ROUGE-Lsum", "summary-level LCS")):
    register_metric(_name, "answers", f"rouge_score F-measure, {_what}", True)
register_metric("METEOR", "answers", "NLTK METEOR with WordNet", True)
for _part in ("P", "R", "F1"):
    register_metric(f"BERTScore {_part}", "answers", f"BERTScore {_part} (no baseline rescaling)", True)
register_metric("BLEU (corpus)", "answers", "sacrebleu corpus BLEU over all questions", True, (0.0, 100.0),
                aggregation="corpus", decimals=2)

# -- chunk quality (chunk_quality.py) ------------------------------------------------------------------------------
register_metric("chunks", "intrinsic", "number of chunks", None, None, "count", 0)
register_metric("chars_mean", "intrinsic", "chunk length, characters (mean)", None, None, decimals=1)
register_metric("chars_variance", "intrinsic", "chunk length, characters (variance)", None, None, "variance", 1)
register_metric("chars_cv", "intrinsic", "chunk length, characters (coefficient of variation)", False, None, "ratio")
register_metric("tokens_mean", "intrinsic", "chunk length, tokens (mean)", None, None, decimals=1)
register_metric("tokens_variance", "intrinsic", "chunk length, tokens (variance)", None, None, "variance", 1)
register_metric("tokens_cv", "intrinsic", "chunk length, tokens (coefficient of variation)", False, None, "ratio")
register_metric("overlap_ratio", "intrinsic", "characters in 2+ chunks / characters in any chunk", None,
                aggregation="ratio")
register_metric("coverage", "intrinsic", "share of the reference body text in some chunk", True, aggregation="ratio")
register_metric("boundary_quality", "intrinsic", "share of chunks whose body content ends at a sentence/block end",
                True)
register_metric("midword_cut_rate", "intrinsic", "share of chunk edges that cut a word", False)
register_metric("noise_chunk_share", "intrinsic", "share of chunks with no body text (headers, footers, TOC only)",
                False)
register_metric("hit_at_1", "retrieval", "first retrieved parent contains the evidence", True)
register_metric("hit_at_k", "retrieval", "retrieved parents contain the evidence", True)
register_metric("span_recall", "retrieval", "evidence characters retrieved / evidence characters", True)
register_metric("span_precision", "retrieval", "evidence characters retrieved / retrieved characters", True)
register_metric("span_iou", "retrieval", "intersection over union of evidence and retrieved characters", True)
register_metric("context_chars", "retrieval", "characters of context the LLM received per question (every question)",
                None, None, decimals=1)
register_metric("concept_unity", "hope", "HOPE concept unity", True)
register_metric("semantic_independence", "hope", "HOPE semantic independence", True)
register_metric("information_preservation", "hope", "HOPE information preservation (accuracy)", True)
register_metric("hope", "hope", "HOPE aggregate (weighted mean of the three)", True)
