"""Workloads: job and service models, the seeded generator, trace readers, preset scenarios."""
