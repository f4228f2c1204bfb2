"""What the benchmarks share (no `__main__` block, so any benchmark may import it): CPU-time clocks."""

from __future__ import annotations

import os
import time
from pathlib import Path


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of this process, or of process `pid` (Linux /proc): on a machine shared with other
    jobs, answers per CPU second compare modes more fairly than wall-clock time."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
