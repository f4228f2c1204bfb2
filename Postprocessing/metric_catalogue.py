"""One catalogue of every metric the scripts report: its group, meaning, direction, scale, aggregation and, where
this package computes it, the function that does.

Modelled on lm-evaluation-harness's `register_metric(higher_is_better=…, aggregation=…)`, whose registration
decorates the metric's function: a metric's facts are declared once, with the code that computes it, and tables,
sentences and the report read them from `get(name)` instead of keeping their own lists or if-chains. A scorer
computes one or more metrics in one pass (ROUGE-1/2/L/Lsum from one scorer, BERTScore P/R/F1 from one model).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragstudy.plugins import Registry

Aggregation = Literal["mean", "corpus", "count", "ratio", "variance"]
# per-item scores: (hypotheses, references, settings) -> {metric name: one value per pair}
ItemScorer = Callable[[Sequence[str], Sequence[str], Any], dict[str, list[float]]]
# a corpus-level statistic with its CI: (hypotheses, references, settings) -> CorpusScore
CorpusScorer = Callable[[Sequence[str], Sequence[str], Any], "CorpusScore"]
# modules whose import registers metrics with their scorers (loaded on first lookup, as the strategy registry does)
BUILTIN_SCORER_MODULES = ("Postprocessing.answer_metrics",)


@dataclass(frozen=True)
class MetricInfo:
    name: str
    group: str  # answers | intrinsic | retrieval | hope
    description: str
    higher_is_better: bool | None  # None: neither direction is better (a count, a length)
    scale: tuple[float, float] | None = (0.0, 1.0)  # None: unbounded
    aggregation: Aggregation = "mean"  # how per-item values become the reported number
    decimals: int = 3
    scorer: str | None = None  # the registered scorer that computes it (None: computed elsewhere)


@dataclass(frozen=True)
class CorpusScore:
    """A corpus-level statistic, its bootstrap CI over items, and what the library says it computed."""

    point: float
    low: float
    high: float
    signature: str = ""


@dataclass(frozen=True)
class Scorer:
    """A function that computes metrics, under the name a script's ``--metrics`` selects it by."""

    name: str
    metrics: tuple[str, ...]  # per-item metrics `items` returns, in table order
    items: ItemScorer
    corpus: dict[str, CorpusScorer]  # corpus-level metrics computed when this scorer is selected


def _load_builtins() -> None:
    """The built-in members of both registries below: the answer metrics' scorers (their modules register them),
    then the core's budget metrics in the retrieval group (ragstudy.scoring.budget_metrics, declared there with their
    compute functions: the same facts, never restated here)."""
    from ragstudy.scoring import budget_metrics

    for module in BUILTIN_SCORER_MODULES:
        importlib.import_module(module)
    for m in budget_metrics.metrics():
        register_metric(m.name, "retrieval", m.description, m.higher_is_better, m.scale, decimals=m.decimals,
                        scorer="ragstudy.scoring.budget_metrics")


# every metric's facts, by metric name (the chunk metrics at the end of this module register as it is imported)
CATALOGUE: Registry[MetricInfo] = Registry("metric", MetricInfo, builtins=_load_builtins, ordered=False)
# the answer metrics' family: what `--metrics bleu,rouge` selects (outside ones from $RAGSTUDY_PLUGIN_PACKAGES)
SCORERS: Registry[Scorer] = Registry("answer metric", Scorer, setting="metrics", builtins=_load_builtins,
                                     ordered=False)


def register_metric(name: str, group: str, description: str, higher_is_better: bool | None,
                    scale: tuple[float, float] | None = (0.0, 1.0), aggregation: Aggregation = "mean",
                    decimals: int = 3, scorer: str | None = None) -> MetricInfo:
    """Declare a metric's facts (idempotent for identical facts)."""
    return CATALOGUE.register(MetricInfo(name, group, description, higher_is_better, scale, aggregation, decimals,
                                         scorer))


def _registered_scorer(name: str) -> Scorer | None:
    return next((s for s in SCORERS.registered() if s.name == name), None)


def register_scorer(name: str, *metrics: MetricInfo) -> Callable[[ItemScorer], ItemScorer]:
    """Decorator: register `metrics` (built with `metric`) as computed per item by the decorated function."""

    def decorate(items: ItemScorer) -> ItemScorer:
        previous = _registered_scorer(name)
        SCORERS.register(Scorer(name, tuple(m.name for m in metrics), items, previous.corpus if previous else {}))
        for m in metrics:
            register_metric(**{**m.__dict__, "scorer": name})
        return items

    return decorate


def register_corpus_metric(scorer: str, info: MetricInfo) -> Callable[[CorpusScorer], CorpusScorer]:
    """Decorator: register a corpus-level metric computed by the decorated function whenever `scorer` runs."""

    def decorate(corpus: CorpusScorer) -> CorpusScorer:
        owner = _registered_scorer(scorer)
        if owner is None:
            raise ValueError(f"register scorer {scorer!r} before its corpus metric {info.name!r}")
        register_metric(**{**info.__dict__, "aggregation": "corpus", "scorer": scorer})
        owner.corpus[info.name] = corpus
        return corpus

    return decorate


def metric(name: str, group: str, description: str, higher_is_better: bool | None,
           scale: tuple[float, float] | None = (0.0, 1.0), decimals: int = 3) -> MetricInfo:
    """A metric's facts, to pass to `register_scorer` / `register_corpus_metric`."""
    return MetricInfo(name, group, description, higher_is_better, scale, decimals=decimals)


def get(name: str) -> MetricInfo:
    """A metric's facts (an UnknownName, also a KeyError, for a metric nobody registered)."""
    return CATALOGUE.get(name, "metric catalogue (register a metric where it is computed)")


def in_group(group: str) -> list[MetricInfo]:
    """The group's metrics in registration order (the order tables show them)."""
    return [info for info in CATALOGUE.members() if info.group == group]


def decimals(name: str) -> int:
    return get(name).decimals if name in CATALOGUE else 3


def scorers() -> dict[str, Scorer]:
    """Every registered scorer by name, in registration order."""
    return {s.name: s for s in SCORERS.members()}


def scorer(name: str) -> Scorer:
    return SCORERS.get(name)


# The chunk metrics below are computed by Postprocessing/chunkeval (chunk_quality.py); their facts stay here until
# those functions register themselves with `register_scorer`.
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
for _measure, _title, _unit in (("concept_unity", "concept unity", ""),
                                ("semantic_independence", "semantic independence", ""),
                                ("information_preservation", "information preservation", " (accuracy)")):
    register_metric(_measure, "hope", f"HOPE {_title}{_unit}", True)
    # the floor (Postprocessing.chunkeval.hope.random_cuts): the same measure on chunks cut at random offsets with
    # the strategy's own chunk lengths, and the strategy's lead over it (two-sample bootstrap CI)
    register_metric(f"{_measure}_random", "hope", f"HOPE {_title} of random cuts with the strategy's chunk lengths "
                    "(the floor)", True)
    register_metric(f"{_measure}_over_random", "hope", f"HOPE {_title} minus its floor (random cuts of the same "
                    "lengths)", True, scale=(-1.0, 1.0))
register_metric("hope", "hope", "HOPE aggregate (weighted mean of the three)", True)
