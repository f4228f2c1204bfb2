"""make-qa as a script: `python tools/make_qa.py --help` (the code is ragstudy.qagen.command; docs/make-qa.md)."""

from __future__ import annotations

import os
import sys

from ragstudy.qagen.command import main

if __name__ == "__main__":
    code = main()
    if code == 130:  # Ctrl-C: every answer is already fsynced in the cache; skip the libraries' teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
