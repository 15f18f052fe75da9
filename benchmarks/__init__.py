"""Benchmarks: run as scripts (`python benchmarks/<name>.py`); `ssbench` holds shared machinery."""
