"""Developer benchmarks, run from a clone (``python -m benchmarks.NAME``); not installed."""
