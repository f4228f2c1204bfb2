"""Question sets generated from the user's own PDFs (`make-qa`): passages sampled from the shared text layer
(never from one strategy's chunks), questions written by an LLM as JSON with a verbatim evidence quote, filtered,
written in the study's formats and reviewed by a person in a workbook. See docs/make-qa.md.

Modules: `sampling` (passages, strata, page furniture), `prompt` (the Italian prompt and its JSON), `filters`
(each rule that drops a candidate), `outputs` (Questions.csv, Oracle.csv, evidence.csv, the sidecar, the report,
the review workbook), `run` (the job), `command` (its flags and `main(argv)`).
"""
