"""Readers of a real cluster's state for the mirror twin (issue 14).

Each reader polls one source and returns a plain, immutable-by-convention view of what it said
(:mod:`twin.mirror.slurm_source`: Slurm's nodes, partitions and jobs;
:mod:`twin.mirror.prom_source`: DCGM-exporter telemetry from Prometheus, as numpy columns).
A source that cannot be read raises :class:`twin.mirror.errors.SourceError`, whose message is
one line naming the source and what went wrong.  Applying the views to the engine is not here.
"""
