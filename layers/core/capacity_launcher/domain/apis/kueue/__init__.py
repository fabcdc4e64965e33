"""Kueue's documents served beside OME's and Karpenter's (docs/api-versions.md)."""
