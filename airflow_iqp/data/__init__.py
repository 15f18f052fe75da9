"""The TPC-H input stream: generate it once, then replay it into a landing directory over time."""
