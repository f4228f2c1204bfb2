"""Postprocessing statistics against hand-computed values and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest


from Postprocessing import formatting
from Postprocessing import survey_stats as stats
from ragstudy.scoring import stats as core_stats

VALUES = np.array([0.12, 0.55, 0.31, 0.9, 0.47, 0.66, 0.05, 0.73, 0.38, 0.29, 0.81, 0.44, 0.58, 0.2, 0.62,
                   0.35, 0.77, 0.15, 0.5, 0.69])


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    mean, low, high = core_stats.bootstrap_ci(VALUES, n_resamples=5000, seed=7)
    assert mean == pytest.approx(VALUES.mean(), abs=1e-12)
    assert low < mean < high
    assert core_stats.bootstrap_ci(VALUES, n_resamples=5000, seed=7) == (mean, low, high)
    assert core_stats.bootstrap_ci(VALUES, n_resamples=5000, seed=8) != (mean, low, high)


def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap():
    from scipy.stats import bootstrap

    _, low, high = core_stats.bootstrap_ci(VALUES, n_resamples=20_000, seed=0)
    ref = bootstrap((VALUES,), np.mean, n_resamples=20_000, method="percentile", random_state=1,
                    confidence_level=0.95).confidence_interval
    assert low == pytest.approx(ref.low, abs=0.01)
    assert high == pytest.approx(ref.high, abs=0.01)


def test_bootstrap_ci_rejects_nan_and_empty():
    with pytest.raises(ValueError, match="NaN"):
        core_stats.bootstrap_ci([0.1, float("nan")])
    with pytest.raises(ValueError, match="non-empty"):
        core_stats.bootstrap_ci([])


def test_paired_bootstrap_constant_difference_has_degenerate_interval():
    a = VALUES + 0.25
    diff, low, high, p = core_stats.paired_bootstrap(a, VALUES, n_resamples=2000, seed=0)
    assert (diff, low, high) == pytest.approx((0.25, 0.25, 0.25))
    assert p < 0.001


def test_wilcoxon_exact_p_by_hand():
    # 6 positive differences with distinct ranks: exact two-sided p = 2 / 2**6.
    a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    b = [0.9, 1.8, 2.7, 3.6, 4.5, 5.4]
    assert core_stats.wilcoxon_p(a, b) == pytest.approx(2 / 64)
    assert core_stats.wilcoxon_p(a, a) == 1.0


def test_holm_by_hand():
    assert core_stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert core_stats.holm([0.0351563, 0.2378845, 0.5078125]) == pytest.approx([0.1054689, 0.475769, 0.5078125],
                                                                          abs=1e-6)


def test_chisquare_and_sign_test_by_hand():
    chi = stats.chisquare_equal([12, 6, 3])
    assert (chi.statistic, chi.df) == (pytest.approx(6.0), 2)
    assert chi.p == pytest.approx(math.exp(-3))  # chi2 survival with df=2 is exp(-x/2)
    assert stats.sign_test_p(12, 18) == pytest.approx(2 * 31180 / 2**18)
    assert stats.sign_test_p(12, 15) == pytest.approx(2 * 576 / 2**15)
    assert stats.sign_test_p(0, 0) == 1.0


def test_fleiss_kappa_wikipedia_example():
    # Fleiss' kappa worked example (Wikipedia, "Fleiss' kappa"): 10 subjects, 14 raters, 5 categories, κ ≈ 0.210.
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert stats.fleiss_kappa(table) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_kappa_perfect_agreement_and_unequal_raters():
    assert stats.fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same number"):
        stats.fleiss_kappa([[3, 0], [1, 1]])


def test_formatting():
    assert formatting.format_estimate(0.0312, 0.0121, 0.0494, signed=True) == "+0.031 [0.012, 0.049]"
    assert formatting.format_estimate(-0.5, -0.7, -0.3, 2, signed=True) == "-0.50 [-0.70, -0.30]"
    assert formatting.format_p(0.0024) == "p=0.002"
    assert formatting.format_p(0.0002) == "p<0.001"
