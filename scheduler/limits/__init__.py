"""Limits every layer may read: the documented bounds of every number the twin accepts
(:mod:`scheduler.limits.bounds`) and the checked parsers that apply them. The bottom layer:
it imports nothing else of :mod:`scheduler`."""
