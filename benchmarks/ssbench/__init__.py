"""The machinery of `benchmarks/vs_structured_streaming.py`: replay, run, measure, check, report."""
