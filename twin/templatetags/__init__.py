"""The twin's template tag libraries (``{% load engine_state %}`` and the others here)."""
