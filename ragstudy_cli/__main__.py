"""`python -m ragstudy_cli ...` is the `ragstudy` command (for a checkout that is not installed)."""

import sys

from ragstudy_cli.app import main

sys.exit(main())
