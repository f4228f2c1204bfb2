"""Seeded statistics of the core: bootstrap confidence intervals, paired comparisons (bootstrap and Wilcoxon) and
Holm's multiple-comparison correction, used by budget evaluation (ragstudy.scoring.budget_eval) and the Postprocessing
scripts. All resampling is seeded (docs/metrics.md, "Confidence level, resamples and seed").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

_BLOCK = 1000  # resamples drawn per block, to bound memory on long inputs


def _as_values(values: Sequence[float] | np.ndarray, what: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what}: need a non-empty 1-D sequence, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: contains NaN or infinite values")
    return arr


def _check(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def bootstrap_distribution(n: int, statistic: Callable[[np.ndarray], np.ndarray], n_resamples: int,
                           seed: int) -> np.ndarray:
    """``statistic`` evaluated on ``n_resamples`` resamples (with replacement) of the indices 0..n-1: it receives
    a (block, n) integer index matrix and returns one value per row."""
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples, dtype=float)
    for start in range(0, n_resamples, _BLOCK):
        size = min(_BLOCK, n_resamples - start)
        out[start:start + size] = statistic(rng.integers(0, n, size=(size, n)))
    return out


def _mean_distribution(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    return bootstrap_distribution(values.size, lambda idx: values[idx].mean(axis=1), n_resamples, seed)


def _paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    """The differences ``a - b`` of two paired samples (ValueError when they differ in length)."""
    x, y = _as_values(a, "a"), _as_values(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    return x - y


def _percentile_interval(dist: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(dist, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_ci(values: Sequence[float] | np.ndarray, n_resamples: int = 10_000, seed: int = 0,
                 confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` and its percentile-bootstrap confidence interval: ``(mean, low, high)``."""
    _check(n_resamples, confidence)
    arr = _as_values(values)
    low, high = _percentile_interval(_mean_distribution(arr, n_resamples, seed), confidence)
    return float(arr.mean()), low, high


def bootstrap_statistic_ci(n: int, statistic: Callable[[np.ndarray], float], n_resamples: int = 10_000,
                           seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """Like :func:`bootstrap_ci` for a statistic of a whole resample (e.g. corpus BLEU): ``statistic(indices)``
    gets one 1-D index array and returns a float; the point estimate uses 0..n-1."""
    _check(n_resamples, confidence)
    if n < 1:
        raise ValueError("n must be >= 1")
    dist = bootstrap_distribution(n, lambda idx: np.array([statistic(row) for row in idx]), n_resamples, seed)
    low, high = _percentile_interval(dist, confidence)
    return float(statistic(np.arange(n))), low, high


@dataclass(frozen=True)
class PairedComparison:
    """Mean of ``a - b`` over the same items, its bootstrap CI and two p-values."""

    n: int
    mean_diff: float
    ci_low: float
    ci_high: float
    p_wilcoxon: float
    p_bootstrap: float


def paired_bootstrap(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, n_resamples: int = 10_000,
                     seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """Paired bootstrap of the mean difference ``a - b``: ``(mean_diff, low, high, p)``. p is two-sided, from the
    bootstrap distribution shifted to the null (mean difference 0): the share of resampled differences at least as
    far from the observed one as the observed one is from 0."""
    _check(n_resamples, confidence)
    d = _paired(a, b)
    dist = _mean_distribution(d, n_resamples, seed)
    low, high = _percentile_interval(dist, confidence)
    observed = float(d.mean())
    extreme = np.abs(dist - observed) >= abs(observed) - 1e-12
    p = float((extreme.sum() + 1) / (n_resamples + 1))
    return observed, low, high, min(1.0, p)


def two_sample_bootstrap(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, n_resamples: int = 10_000,
                         seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean difference ``mean(a) - mean(b)`` of two independent samples and its percentile-bootstrap interval
    (each sample resampled on its own): ``(diff, low, high)``."""
    _check(n_resamples, confidence)
    x, y = _as_values(a, "a"), _as_values(b, "b")
    dist = _mean_distribution(x, n_resamples, seed) - _mean_distribution(y, n_resamples, seed + 1)
    low, high = _percentile_interval(dist, confidence)
    return float(x.mean() - y.mean()), low, high


def wilcoxon_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of ``a - b`` (scipy; exact for small n without ties); all-zero
    differences give p = 1 (scipy would refuse them)."""
    from scipy.stats import wilcoxon

    d = _paired(a, b)
    if np.all(np.abs(d) < 1e-12):
        return 1.0
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def compare_paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, n_resamples: int = 10_000,
                   seed: int = 0, confidence: float = 0.95) -> PairedComparison:
    """Paired bootstrap CI of mean(a - b) plus Wilcoxon and bootstrap p-values."""
    mean_diff, low, high, p_boot = paired_bootstrap(a, b, n_resamples, seed, confidence)
    return PairedComparison(len(a), mean_diff, low, high, wilcoxon_p(a, b), p_boot)


def derangement(n: int, seed: int) -> list[int]:
    """A seeded permutation of 0..n-1 with no fixed point (Sattolo's algorithm: one n-cycle); n < 2 -> ValueError."""
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 items, got {n}")
    order = list(range(n))
    rng = np.random.default_rng(seed)
    for i in range(n - 1, 0, -1):
        j = int(rng.integers(0, i))  # j < i: Sattolo, so every element moves
        order[i], order[j] = order[j], order[i]
    return order


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (same order as given)."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(p.size)
    adjusted[order] = np.maximum.accumulate(np.minimum(1.0, (p.size - np.arange(p.size)) * p[order]))
    return adjusted.tolist()


# ------------------------------------------------------------------------------ what a table's intervals are

HOLM_COLUMN = "p_holm"  # the Holm-adjusted p-value column of every paired table
CI_COLUMNS = ("confidence", "n_resamples", "seed")  # recorded in every summary and paired table


@dataclass(frozen=True)
class CiSettings:
    """How a table's intervals were computed; its columns are recorded in every summary and paired table, so that
    labels ("90 % CI") are made from what a file says, never assumed."""

    n_resamples: int = 10_000
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        _check(self.n_resamples, self.confidence)

    def columns(self) -> dict[str, float | int]:
        return {"confidence": self.confidence, "n_resamples": self.n_resamples, "seed": self.seed}


def ci_label(confidence: float) -> str:
    """'95 %' for 0.95, '97.5 %' for 0.975: the level as tables and sentences print it."""
    return f"{float(confidence) * 100:.10g} %"


def recorded_confidence(frame, what: str) -> float:
    """The one confidence level a table records (its `confidence` column); ValueError naming `what` when the
    column is absent or holds several levels."""
    if frame is None or "confidence" not in frame.columns:
        raise ValueError(f"{what} records no confidence level (written by an older version: re-run its script)")
    levels = sorted({float(c) for c in frame["confidence"].dropna()})
    if len(levels) != 1:
        raise ValueError(f"{what} records {len(levels)} confidence levels {levels}; expected one")
    return levels[0]
