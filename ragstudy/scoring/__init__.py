"""Scoring and the verdict: evidence and ground truth, budgets and their metrics, statistics, verdicts."""
