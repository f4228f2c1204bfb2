"""Chunk-quality evaluation: intrinsic chunk statistics, retrieval metrics from evidence spans, and HOPE.

Modules: ``align`` (map chunks of any strategy onto one common reference text), ``intrinsic``, ``retrieval``,
``hope``, ``report`` (tables and correlations). The script is ``Postprocessing/chunk_quality.py``.
"""
