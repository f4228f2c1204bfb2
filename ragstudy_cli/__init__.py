"""The `ragstudy` command line: one command, a subcommand for every job of the study.

The top layer of the repository (tests/test_structure.py): each subcommand parses its flags and calls a library job
(ragstudy.answering.chain, the Postprocessing job modules, ragstudy.qagen.command), and it imports no script. Nothing
imports this package but its own modules and the shims the paper's script paths became (`python evaluation_chain.py`
runs `ragstudy answer`, with the same flags).
"""
