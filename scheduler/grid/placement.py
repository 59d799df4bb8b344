"""Where a grid job runs: hard filters, then cost, expected start and data gravity by weight.

Hard filters, each with its reason when a place is ruled out: sovereignty (the job's allowed
places or jurisdictions), software stack, an accelerator the job accepts in a pool large
enough for the whole gang (a gang never spans places here; a cross-site job that no place
takes soon enough is split by :mod:`scheduler.grid.cross_site`), the place being up, and a WAN path
from a copy of the job's data (and of its latest checkpoint, for a job restarting elsewhere).
A job no place passes is refused with every place's reason; one ruled out only by something
that passes (a dark place, a cut WAN, a cloud region under a supply cut) waits at the grid for
it to change.

Three criteria rank the places that pass, each scaled by its largest value among them
(0 is best) and summed with the operator's :class:`Weights`:

* **cost**: the job's compute at this place (GPU-hours on its model, at the site's energy
  price x PUE or the cloud's on-demand price, start-up included) plus the egress of the data
  it must move there;
* **start**: the expected wait before it computes: moving its data, the cloud's start-up,
  and the place's queue (:meth:`scheduler.grid.places.Place.expected_wait_s`);
* **gravity**: the time and the price of moving its dataset and checkpoint there (half each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.grid.supply import refusal


@dataclass(frozen=True)
class Weights:
    """How much each criterion counts (non-negative, not all zero)."""

    cost: float = 1.0
    start: float = 0.0
    gravity: float = 0.0

    def __post_init__(self) -> None:
        vals = (self.cost, self.start, self.gravity)
        if not all(isinstance(v, int | float) and math.isfinite(v) and v >= 0 for v in vals) \
                or not any(vals):
            raise ValueError("placement weights (cost, start, gravity) must be finite, "
                             f">= 0 and not all zero, not {vals}")


POLICIES = {
    "cost": Weights(1.0, 0.0, 0.0),
    "start": Weights(0.0, 1.0, 0.0),
    "gravity": Weights(0.0, 0.0, 1.0),
    "balanced": Weights(1.0, 1.0, 1.0),
}
"""Named weightings: one criterion alone, or all three alike."""


def weights_of(policy) -> Weights:
    """A name of :data:`POLICIES`, a :class:`Weights`, or a ``{"cost", "start", "gravity"}``
    mapping."""
    if isinstance(policy, Weights):
        return policy
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise ValueError(f"unknown grid placement policy {policy!r}; choose one of: "
                             f"{', '.join(POLICIES)} (or weights)")
        return POLICIES[policy]
    if isinstance(policy, dict):
        unknown = set(policy) - {"cost", "start", "gravity"}
        if unknown:
            raise ValueError(f"placement weights name cost, start and gravity, not "
                             f"{', '.join(sorted(unknown))}")
        return Weights(**{k: float(v) for k, v in policy.items()})
    raise ValueError(f"a grid placement policy is a name or weights, not {policy!r}")


@dataclass
class Move:
    """Bytes a job needs moved before it runs at a place."""

    src: str
    gb: float
    tag: str  # "dataset" or "checkpoint"


@dataclass
class Option:
    """One place a job may run at, with what it would cost and wait there."""

    place: str
    model: int
    compute_cost: float
    move_s: float
    move_cost: float
    wait_s: float
    moves: list[Move] = field(default_factory=list)
    score: float = 0.0

    @property
    def cost(self) -> float:
        return self.compute_cost + self.move_cost

    @property
    def move_gb(self) -> float:
        return sum(m.gb for m in self.moves)


@dataclass
class Verdict:
    """The chosen option, or ``None`` with the reasons (``waits``: a reason may pass)."""

    option: Option | None
    options: list[Option]
    reasons: dict[str, str]
    waits: bool = False

    def why_not(self) -> str:
        return "; ".join(f"{p}: {r}" for p, r in self.reasons.items())


def _needs(gjob, place: str, grid) -> tuple[list[Move], float, float] | str:
    """The moves to ``place`` (from the best live copy), their time and price, or why not."""
    moves, secs, price = [], 0.0, 0.0
    wants = []
    if gjob.dataset_gb > 0 and place not in grid.copies(gjob.dataset):
        wants.append(("dataset", gjob.dataset_gb, grid.copies(gjob.dataset)))
    ckpt = grid.checkpoint_of(gjob.name)
    if ckpt is not None and ckpt[0] != place:
        wants.append(("checkpoint", ckpt[1], {ckpt[0]}))
    for tag, gb, holders in wants:
        best = None
        live = [src for src in sorted(holders) if not grid.places[src].dark]
        for src in live:
            est = grid.wan.estimate(src, place, gb)
            if est is not None and (best is None or est < best[1]):
                best = (src, est)
        if not live:
            return f"every copy of its {tag} is in the dark"
        if best is None:
            return f"no WAN path from a live copy of its {tag}"
        moves.append(Move(best[0], gb, tag))
        secs = max(secs, best[1][0])
        price += best[1][1]
    return moves, secs, price


def assess(gjob, grid) -> Verdict:
    """Filter the grid's places for ``gjob`` and rank those that pass by ``grid.weights``."""
    job = gjob.job
    options, reasons, waits = [], {}, False
    remaining = grid.remaining_flops(gjob.name)
    for name, place in grid.places.items():
        if not gjob.allows(name, place.jurisdiction):
            reasons[name] = (f"sovereignty: {place.jurisdiction} is not among "
                             f"{', '.join(gjob.allowed)}")
            continue
        if not gjob.runs_on(place.stacks):
            reasons[name] = (f"stack: runs {', '.join(place.stacks)}, the job "
                             f"{', '.join(gjob.stacks)}")
            continue
        model, gpus = place.capacity(job)
        if gpus < job.gpus:
            reasons[name] = (f"no pool of {job.requirement.describe()} holds {job.gpus} GPUs "
                             f"(largest here: {gpus})")
            continue
        if place.dark:
            reasons[name] = "dark (region lost)"
            waits = True
            continue
        cut = refusal(place, model)
        if cut:
            reasons[name] = cut
            waits = True
            continue
        need = _needs(gjob, name, grid)
        if isinstance(need, str):
            reasons[name] = need
            waits = True
            continue
        moves, move_s, move_cost = need
        acc = place.engine.plan.models[model]
        hours = (remaining / (acc.bf16_tflops * 1e12 * job.efficiency) / 3600.0
                 + job.gpus * place.startup_s / 3600.0)
        wait = place.expected_wait_s(job.gpus, model, grid.inbound_gpus(name))
        options.append(Option(name, model, hours * place.price_per_gpu_hour(model), move_s,
                              move_cost, move_s + place.startup_s + wait, moves))
    if not options:
        return Verdict(None, [], reasons, waits)
    w = grid.weights

    def scaled(values):
        top = max(values)
        return [v / top if top > 0 and math.isfinite(top) else 0.0 for v in values]

    cost = scaled([o.cost for o in options])
    start = scaled([min(o.wait_s, 1e12) for o in options])
    g_time = scaled([o.move_s for o in options])
    g_price = scaled([o.move_cost for o in options])
    for k, o in enumerate(options):
        o.score = (w.cost * cost[k] + w.start * start[k]
                   + w.gravity * 0.5 * (g_time[k] + g_price[k]))
    best = min(range(len(options)), key=lambda k: (round(options[k].score, 12),
                                                   options[k].cost, k))
    return Verdict(options[best], options, reasons, waits)
