"""The `ragstudy` command line: one command, a subcommand for every job of the study.

The top layer of the repository (tests/test_structure.py): it imports the entry points (evaluation_chain.py and the
Postprocessing scripts) for their parsers and runs, so that a subcommand and its script are the same code with the
same flags. Nothing imports this package but its own modules.
"""
