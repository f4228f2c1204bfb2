"""make-qa as a script: `python tools/make_qa.py --help` (the code is ragstudy.qagen.command; docs/make-qa.md)."""

from __future__ import annotations

from ragstudy.io import exit_process
from ragstudy.qagen.command import main

if __name__ == "__main__":
    exit_process(main())
