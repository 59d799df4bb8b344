"""Failures are normal: failure modes and processes, recovery, hot spares, checkpoints."""
