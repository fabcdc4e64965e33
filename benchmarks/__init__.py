"""Measured scenarios with a baseline beside each; `python -m benchmarks` writes docs/BENCHMARKS.md."""
