"""Operator and what-if commands, drills, and state injected from a real cluster."""
