"""A grid job: a training job with a location (its data, where it may run, what it runs on).

The location is kept beside :class:`~scheduler.workload.jobs.TrainingJob`, not in it: a new
field on that class changes the pickled layout of every engine snapshot
(``tests/fixtures/snapshots/layout-v6.json``, a format bump), while a place's engine never
needs to know where a job's data came from.  The grid submits the plain job to the place it
chose; the location is the grid's own business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.workload.jobs import TrainingJob


@dataclass(frozen=True)
class GridJob:
    """A training job as the grid sees it.

    Parameters
    ----------
    job : TrainingJob
        The gang, its work and checkpoint size; its ``submit_s`` is when it reaches the grid.
        A gang never spans places (it runs whole at one site or cloud region) unless
        ``cross_site`` allows it.
    dataset : str
        The dataset's name (jobs naming the same dataset share its copies); empty: no data.
    data_site : str
        The place that holds the dataset at the start (a site name or ``provider/region``).
    dataset_gb : float
        Bytes the job reads, GB; moved over the WAN before it runs at a place without a copy.
    allowed : tuple of str
        Where it may run (sovereignty): place names or jurisdictions; empty: anywhere.
    stacks : tuple of str
        Software stacks it can run on (``"cuda"``, ``"rocm"`` ...); empty: any.  A place
        that names its stacks takes the job only if they share one.
    cross_site : bool
        Its DP replicas may be split over two places joined by the WAN, paying the gradient
        exchange in its step time (:mod:`scheduler.grid.cross_site`); needs ``job.params_b``
        to size the gradients.  Default ``False``: it runs whole at one place.
    """

    job: TrainingJob
    dataset: str = ""
    data_site: str = ""
    dataset_gb: float = 0.0
    allowed: tuple[str, ...] = ()
    stacks: tuple[str, ...] = ()
    cross_site: bool = False

    def __post_init__(self) -> None:
        if not (self.dataset_gb >= 0 and math.isfinite(self.dataset_gb)):
            raise ValueError(f"grid job {self.job.name}: dataset size must be a finite number "
                             f">= 0 GB, not {self.dataset_gb!r}")
        if self.dataset_gb > 0 and not (self.dataset and self.data_site):
            raise ValueError(f"grid job {self.job.name}: a dataset of {self.dataset_gb:g} GB "
                             "needs a name and the place that holds it")
        if not isinstance(self.cross_site, bool):
            raise ValueError(f"grid job {self.job.name}: cross_site is True or False, not "
                             f"{self.cross_site!r}")
        if self.cross_site and not self.job.params_b > 0:
            raise ValueError(f"grid job {self.job.name}: cross-site data parallelism needs "
                             "params_b > 0 to size the gradients it sends over the WAN")

    @property
    def name(self) -> str:
        return self.job.name

    def allows(self, place: str, jurisdiction: str) -> bool:
        """Whether sovereignty lets the job run at ``place`` (in ``jurisdiction``)."""
        return not self.allowed or place in self.allowed or jurisdiction in self.allowed

    def runs_on(self, stacks: tuple[str, ...]) -> bool:
        """Whether the job runs on a place offering ``stacks`` (empty: any stack)."""
        return not self.stacks or not stacks or bool(set(self.stacks) & set(stacks))


def check_jobs(jobs, places: tuple[str, ...]) -> None:
    """Refuse a grid workload that names a place the grid lacks or repeats a name."""
    seen: set[str] = set()
    for g in jobs:
        if not isinstance(g, GridJob):
            raise ValueError(f"a grid workload holds GridJob items, not {type(g).__name__}")
        if g.name in seen:
            raise ValueError(f"grid job names repeat: {g.name!r}")
        seen.add(g.name)
        if g.data_site and g.data_site not in places:
            raise ValueError(f"grid job {g.name}: its data site {g.data_site!r} is no place "
                             f"of the grid ({', '.join(places)})")
