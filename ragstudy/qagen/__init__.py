"""Question sets generated from the user's own PDFs (`make-qa`): passages sampled from the shared text layer
(never from one strategy's chunks), questions written by an LLM as JSON with a verbatim evidence quote, filtered,
written in the study's formats and reviewed by a person in a workbook. See docs/make-qa.md.
"""
