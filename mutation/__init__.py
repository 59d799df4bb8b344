"""Mutation testing helpers (``make mutation``; see docs/mutation.md)."""
