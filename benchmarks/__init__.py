"""Measured scenarios, each beside its baseline.

`python -m benchmarks` writes docs/BENCHMARKS.md.
"""
