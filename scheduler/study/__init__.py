"""Studies: scenario x seed sweeps compared with confidence intervals (docs/studies.md).

:mod:`~scheduler.study.spec` reads and checks a spec (every mistake at once, each at its line:
:mod:`~scheduler.study.spec_checks`), :mod:`~scheduler.study.run` runs one
(arm, seed) anywhere (a Dask worker, the CLI's own process), :mod:`~scheduler.stats`
and :mod:`~scheduler.study.summary` turn the runs into intervals, paired differences and
verdicts.  Distribution (Dask) and the report files live in ``twin/studies/``.
"""
