"""Chunk-quality evaluation: intrinsic chunk statistics, retrieval metrics from evidence spans, and HOPE.

Modules: ``align`` (map chunks of any strategy onto one common reference text), ``intrinsic``, ``chain_retrieval``
(the chain's own contexts against evidence; the span metrics are ``ragstudy.scoring.evidence``'s), ``hope``, ``data``
(reading the exports and Dataset files) and ``tables`` (the quality table and correlations). The script is
``Postprocessing/chunk_quality.py``.
"""
