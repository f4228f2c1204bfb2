"""make-qa as a script: `python tools/make_qa.py --help` (the code is ragstudy.qagen.cli; docs/make-qa.md)."""

from __future__ import annotations

import sys

from ragstudy.qagen.cli import main

if __name__ == "__main__":
    sys.exit(main())
