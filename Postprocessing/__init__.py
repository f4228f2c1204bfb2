"""Postprocessing of the study's outputs: a small library plus thin scripts.

Library (no ``__main__``): ``common`` (reading the chain's files), ``cli`` (logging, exit codes, shared flags),
``metric_catalogue`` + ``answer_metrics`` (metrics registered with their compute functions), ``answer_scoring``
(metrics tables), ``stats``, ``formatting``, ``plots``, ``review`` (the review workbook and answer key),
``survey`` (reading and analysing the raters' answers), ``offline_data``. Scripts (``evaluation_metrics.py``,
``preprocessing_files.py``, ``interview_analysis.py``, ...) parse arguments and call the library; no library module
imports a script.
"""
