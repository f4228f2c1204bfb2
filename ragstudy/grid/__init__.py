"""The grid of variants and its executors: axes, variants, their records, sweeps, in-process/worker/Ray runs."""
