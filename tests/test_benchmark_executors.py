"""benchmarks/executors.py: the speed-up bound it prints under its table."""

from __future__ import annotations

from benchmarks.executors import speed_up_bound


def test_the_bound_is_the_cores_over_the_cores_the_in_process_run_kept_busy() -> None:
    # the shared PDFs' in-process run at 479bc9a: 312.1 CPU-s in 191.5 s on two cores
    line = speed_up_bound(312.1, 191.5, 2)
    assert "kept 1.63 of this machine's 2 cores busy" in line and "more than 1.23x as fast" in line
    assert "more than 2.00x" in speed_up_bound(10.0, 10.0, 2)  # one core busy: two cores at most double it
    assert "more than 16.00x" in speed_up_bound(10.0, 10.0, 16)
    assert "no bound" in speed_up_bound(0.0, 10.0, 2)
