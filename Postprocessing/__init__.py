"""Postprocessing of the study's outputs: a small library plus thin scripts.

Library (no ``__main__``): ``common`` (reading the chain's files), ``cli`` (logging, exit codes, shared flags),
``metric_catalogue`` + ``answer_metrics`` (metrics registered with their compute functions), ``answer_scoring``
(metrics tables), ``stats``, ``formatting``, ``plots``, ``review`` (the review workbook and answer key),
``survey`` (reading and analysing the raters' answers), ``offline_data``, and the jobs of the subcommands, each a
function that takes its parsed settings and returns what it wrote: ``score_retrieval``, ``score_answers``,
``judge_chunks``, ``build_review``, ``analyse_survey``, ``write_report``. The paper's script paths
(``retrieval_eval.py``, ``evaluation_metrics.py``, ``chunk_quality.py``, ``preprocessing_files.py``,
``interview_analysis.py``, ``report.py``) are shims onto ``ragstudy SUB``; no module imports one.
"""
