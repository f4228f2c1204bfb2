"""Survey statistics: chi-square against equal shares, the sign test and Fleiss' kappa.

The bootstrap, paired comparisons and Holm correction every table uses live in the core (ragstudy.scoring.stats);
formatting of estimates and p-values in Postprocessing.formatting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ChiSquare:
    statistic: float
    df: int
    p: float


def chisquare_equal(counts: Sequence[int]) -> ChiSquare:
    """Chi-square goodness of fit of ``counts`` against equal expected counts."""
    from scipy.stats import chisquare

    obs = np.asarray(counts, dtype=float)
    if obs.size < 2 or obs.sum() <= 0:
        raise ValueError(f"need at least two categories and a positive total, got {list(counts)}")
    res = chisquare(obs)
    return ChiSquare(float(res.statistic), int(obs.size - 1), float(res.pvalue))


def sign_test_p(k: int, n: int) -> float:
    """Two-sided exact binomial (sign) test of k successes in n trials against p = 1/2; n = 0 gives 1."""
    from scipy.stats import binomtest

    if n == 0:
        return 1.0
    return float(binomtest(k, n, 0.5, alternative="two-sided").pvalue)


def fleiss_kappa(table: Sequence[Sequence[int]] | np.ndarray) -> float:
    """Fleiss' kappa of a subjects × categories table of rating counts (same number of raters per subject)."""
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.shape[0] < 1:
        raise ValueError("table must be 2-D with at least one subject")
    n_raters = t.sum(axis=1)
    if not np.allclose(n_raters, n_raters[0]) or n_raters[0] < 2:
        raise ValueError(f"every subject needs the same number (>= 2) of ratings, got {n_raters.tolist()}")
    n = n_raters[0]
    p_j = t.sum(axis=0) / t.sum()
    p_i = ((t * t).sum(axis=1) - n) / (n * (n - 1))
    p_bar, p_e = p_i.mean(), float((p_j**2).sum())
    if math.isclose(p_e, 1.0):
        return float("nan")  # every rating in one category: kappa undefined
    return float((p_bar - p_e) / (1.0 - p_e))
