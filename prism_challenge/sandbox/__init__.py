"""Sandboxed re-execution: harness (inside), feeder and backends (outside), run record."""
