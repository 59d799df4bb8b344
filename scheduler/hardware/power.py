"""Power figures for nodes, switches and optics (kW and W), with their sources.

Calibration (see ``../shared/reference/figures.md``):

* DGX H100: about 10.2 kW with 8 x 700 W GPUs, so about 4.6 kW goes to the host (CPUs,
  NVSwitches, NICs, fans, drives): 0.575 kW per accelerator slot, applied to every model.
* Optics per module type (:mod:`scheduler.fabric.optics`): 400G single-port 8-9 W,
  800G twin-port 15 W multimode / 17 W single-mode; the compute fabric uses twin-port
  multimode modules as the DGX SuperPOD RA does (7.5 W per link end, not 8.5).
* Switches: a 64 x 400G NDR switch without optics is taken as 1.0 kW (assumed; the vendor
  publishes a maximum, not a typical draw).
* The storage, in-band and out-of-band fabrics are in the network roll-up too
  (:func:`scheduler.fabric.optics.support_fabrics`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from scheduler.fabric.optics import (
    COMPUTE_MODULE,
    COMPUTE_SWITCH_KW,
    OPTICS,
    compute_optics,
    support_fabrics,
)
from scheduler.hardware.catalog import Accelerator

if TYPE_CHECKING:
    from scheduler.hardware.cluster import ClusterPlan

HOST_KW_PER_ACCELERATOR = 4.6 / 8
TRANSCEIVER_W = OPTICS[COMPUTE_MODULE].watts / OPTICS[COMPUTE_MODULE].ports
"""Compute-fabric optics per link end, W (a twin-port 15 W module serves two ends)."""
SWITCH_KW = COMPUTE_SWITCH_KW


def node_kw(model: Accelerator, count: int) -> float:
    """Peak IT power of one node, kW.

    >>> from scheduler.hardware.catalog import get
    >>> round(node_kw(get("H100-SXM"), 8), 1)
    10.2
    """
    return count * (model.power_w / 1000.0 + HOST_KW_PER_ACCELERATOR)


HOST_IDLE_FRACTION = 0.5
"""Host draw at idle as a share of its peak (CPUs, NVSwitches, NICs, fans, drives): "even an
energy-efficient server still consumes about half its full power when doing virtually no work"
(Barroso and Hölzle, "The Case for Energy-Proportional Computing", IEEE Computer 2007)."""

PUE_DEFAULT = 1.2
"""Facility power / IT power; published values run from about 1.1 (hyperscale) to 1.5-1.6
(industry average), figures.md."""

THROTTLE_FLOOR = 0.3
"""Lowest throttle factor of a capped rack's accelerators (assumed: about the lowest power
limit a data-centre GPU accepts, roughly 30 % of TDP).  A rack that would need less stays over
its cap and is flagged ``over_cap``."""

SUPPLY_AIR_C = 24.0
"""Cold-aisle supply temperature, deg C (assumed; inside ASHRAE's recommended 18-27 deg C)."""

DESIGN_DELTA_T_K = 12.0
"""Air (or coolant) temperature rise across a rack drawing its provisioned power, K (assumed;
air-cooled racks are designed for about 10-15 K)."""


def gpu_power_w(model: Accelerator, utilisation):
    """Board power of accelerators at ``utilisation`` (0-1), W: linear from idle to TDP.

    Power linear in utilisation is the usual first-order model of a server (Fan, Weber and
    Barroso, "Power Provisioning for a Warehouse-sized Computer", ISCA 2007); idle is the
    catalog's ``idle_w`` (assumed 15-20 % of TDP), full load ``power_w`` (TDP).

    >>> from scheduler.hardware.catalog import get
    >>> gpu_power_w(get("H100-SXM"), 0.0), gpu_power_w(get("H100-SXM"), 1.0)
    (120.0, 700.0)
    >>> gpu_power_w(get("H100-SXM"), np.array([0.5, 2.0])).tolist()
    [410.0, 700.0]
    """
    u = np.clip(utilisation, 0.0, 1.0)
    watts = model.idle_w + (model.power_w - model.idle_w) * u
    return float(watts) if np.ndim(watts) == 0 else watts


def host_power_w(utilisation):
    """Host share of one accelerator slot at its accelerator's ``utilisation`` (0-1), W.

    >>> host_power_w(0.0), host_power_w(1.0)
    (287.5, 575.0)
    """
    u = np.clip(utilisation, 0.0, 1.0)
    watts = HOST_KW_PER_ACCELERATOR * 1000.0 * (HOST_IDLE_FRACTION
                                                + (1.0 - HOST_IDLE_FRACTION) * u)
    return float(watts) if np.ndim(watts) == 0 else watts


def node_power_kw(model: Accelerator, count: int, utilisation) -> float:
    """IT power of one node of ``count`` accelerators at ``utilisation``, kW.

    >>> from scheduler.hardware.catalog import get
    >>> h100 = get("H100-SXM")
    >>> round(node_power_kw(h100, 8, 1.0), 1), round(node_power_kw(h100, 8, 0.0), 2)
    (10.2, 3.26)
    """
    return float(count * (gpu_power_w(model, utilisation) + host_power_w(utilisation)) / 1000.0)


def network_kw(plan: ClusterPlan, *, module: str = COMPUTE_MODULE,
               support: bool = True) -> float:
    """Switches and optics, kW: not in the compute racks, so booked to the facility's IT load.

    Compute fabric: :data:`SWITCH_KW` per switch and ``module`` optics on every optical link
    end (as ``ClusterPlan.summary``); with ``support``, the storage, in-band and out-of-band
    fabrics of the plan's nodes too.  All draw the same at any load.
    """
    kw = SWITCH_KW * plan.fabric.n_switches() + compute_optics(plan.fabric, module)[1]
    if support:
        kw += sum(f.kw() for f in support_fabrics(plan.n_nodes))
    return kw


@dataclass(frozen=True)
class _GpuColumns:
    rack: np.ndarray      # rack of every GPU
    idle_w: np.ndarray    # GPU idle power, W
    span_w: np.ndarray    # TDP - idle, W


def _gpu_columns(plan: ClusterPlan) -> _GpuColumns:
    gpu_model = plan.node_model[plan.gpu_node()]
    idle = np.array([m.idle_w for m in plan.models])[gpu_model]
    tdp = np.array([m.power_w for m in plan.models])[gpu_model]
    return _GpuColumns(plan.node_rack[plan.gpu_node()], idle, tdp - idle)


def _split_kw(cols: _GpuColumns, gpu_util: np.ndarray, n_racks: int):
    """(GPU kW, host kW) per rack at ``gpu_util``."""
    u = np.clip(gpu_util, 0.0, 1.0)
    host_full = HOST_KW_PER_ACCELERATOR * 1000.0
    gpu = np.bincount(cols.rack, weights=cols.idle_w + cols.span_w * u, minlength=n_racks)
    host = np.bincount(cols.rack, weights=host_full * (HOST_IDLE_FRACTION
                                                       + (1.0 - HOST_IDLE_FRACTION) * u),
                       minlength=n_racks)
    return gpu / 1e3, host / 1e3


def _util(plan: ClusterPlan, gpu_util) -> np.ndarray:
    u = np.asarray(gpu_util, dtype=float)
    if u.ndim == 0:
        return np.full(plan.n_gpus, float(u))
    if u.shape != (plan.n_gpus,):
        raise ValueError(f"gpu_util must have one entry per GPU ({plan.n_gpus}), "
                         f"not shape {u.shape}")
    return u


def rack_power_kw(plan: ClusterPlan, gpu_util) -> np.ndarray:
    """IT power of every rack, kW: GPUs at their utilisation plus their host share.

    ``gpu_util`` is one figure per GPU (0-1) or a scalar for all.  Switches and optics are not
    in the compute racks (see :func:`network_kw`).

    >>> from scheduler.hardware.cluster import NodeGroup, plan_cluster
    >>> plan = plan_cluster("t", (NodeGroup("H100-SXM", 8),), fabric_kind="fat-tree",
    ...                     fabric_kw={"radix": 8})
    >>> rack_power_kw(plan, 1.0).round(1).tolist()
    [40.8, 40.8]
    """
    gpu, host = _split_kw(_gpu_columns(plan), _util(plan, gpu_util), plan.n_racks)
    return gpu + host


@dataclass(frozen=True)
class PowerResult:
    """One :meth:`PowerModel.step`: per-rack arrays (kW, deg C), per-GPU throttle, totals (MW).

    ``rack_throttle`` multiplies the speed of every accelerator of the rack (1: not throttled);
    ``gpu_throttle`` is the same per GPU.  ``rack_kw`` is the draw after throttling,
    ``rack_demand_kw`` before; ``rack_cap_kw`` the binding limit (power cap or cooling share).
    """

    rack_kw: np.ndarray
    rack_demand_kw: np.ndarray
    rack_cap_kw: np.ndarray
    rack_throttle: np.ndarray
    gpu_throttle: np.ndarray
    over_cap: np.ndarray
    inlet_c: np.ndarray
    outlet_c: np.ndarray
    network_kw: float
    it_mw: float
    facility_mw: float

    @property
    def throttled_gpus(self) -> int:
        return int(np.count_nonzero(self.gpu_throttle < 1.0))


class PowerModel:
    """Power and cooling of one cluster as limits on its accelerators' speed.

    Parameters
    ----------
    plan : ClusterPlan
    pue : float
        Facility / IT power (default :data:`PUE_DEFAULT`; 1.1-1.6 published, figures.md).
    rack_caps_kw : array of float, optional
        Power cap per rack, kW; by default the plan's provisioned ``rack_power_kw``.

    Cooling is provisioned per row of racks (a cooling zone: row ids run over (hall, row) in
    that order, as the failure engine's ``cooling`` units) at the sum of its racks' provisioned
    power, ``row_cooling_kw``; :meth:`cool_row` takes some away.  A rack's cooling share is its
    row's capacity in proportion to its provisioned power.

    Examples
    --------
    >>> from scheduler.hardware.cluster import NodeGroup, plan_cluster
    >>> plan = plan_cluster("t", (NodeGroup("H100-SXM", 4),), fabric_kind="fat-tree",
    ...                     fabric_kw={"radix": 8})
    >>> pm = PowerModel(plan, rack_caps_kw=np.array([30.0]))
    >>> r = pm.step(1.0)           # GPUs 22.4 kW + hosts 18.4 kW asked of a 30 kW cap
    >>> float(r.rack_kw[0]), round(float(r.rack_throttle[0]), 3)     # (30 - 18.4) / 22.4
    (30.0, 0.518)
    """

    def __init__(self, plan: ClusterPlan, *, pue: float = PUE_DEFAULT,
                 rack_caps_kw: np.ndarray | None = None):
        if not pue >= 1.0:
            raise ValueError(f"PUE must be at least 1, not {pue!r}")
        self.plan = plan
        self.pue = float(pue)
        base = plan.rack_power_kw if rack_caps_kw is None else rack_caps_kw
        base = np.asarray(base, dtype=float)
        if base.shape != (plan.n_racks,):
            raise ValueError(f"rack_caps_kw must have one entry per rack ({plan.n_racks})")
        self.base_caps_kw = base.copy()
        self.caps_kw = base.copy()
        self._cols = _gpu_columns(plan)
        self.network_kw = network_kw(plan)
        self.rack_row = np.unique(plan.rack_hall.astype(np.int64) * (plan.rack_row.max(
            initial=0) + 1) + plan.rack_row, return_inverse=True)[1]
        self.n_rows = int(self.rack_row.max(initial=-1)) + 1
        self.row_cooling_kw = np.bincount(self.rack_row, weights=base, minlength=self.n_rows)
        self.cooling_fraction = np.ones(self.n_rows)
        row_base = self.row_cooling_kw[self.rack_row]
        self._cooling_share = np.divide(base, row_base, out=np.zeros_like(base),
                                        where=row_base > 0)

    # ------------------------------------------------------------------ drills
    def cap_rack(self, rack: int, kw: float) -> None:
        """Cap one rack's power at ``kw`` (a power-capping drill)."""
        if not 0 <= rack < self.plan.n_racks:
            raise ValueError(f"rack {rack} does not exist (ids 0 .. {self.plan.n_racks - 1})")
        if not kw > 0:
            raise ValueError(f"a rack cap must be positive, not {kw!r}")
        self.caps_kw[rack] = float(kw)

    def cap_all(self, fraction: float) -> None:
        """Cap every rack at ``fraction`` of its provisioned power (1 lifts the caps)."""
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], not {fraction!r}")
        self.caps_kw = self.base_caps_kw * float(fraction)

    def cool_row(self, row: int, fraction: float) -> None:
        """Leave row ``row`` ``fraction`` of its cooling capacity (a cooling loss; 1 restores)."""
        if not 0 <= row < self.n_rows:
            raise ValueError(f"row {row} does not exist (ids 0 .. {self.n_rows - 1})")
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be in [0, 1], not {fraction!r}")
        self.cooling_fraction[row] = float(fraction)

    def restore(self) -> None:
        """Lift every cap and restore all cooling."""
        self.caps_kw = self.base_caps_kw.copy()
        self.cooling_fraction[:] = 1.0

    def rack_cooling_kw(self) -> np.ndarray:
        """Heat each rack's cooling can remove now, kW (its row's capacity by provisioned share)."""
        row = self.rack_row
        return self.row_cooling_kw[row] * self.cooling_fraction[row] * self._cooling_share

    # ------------------------------------------------------------------ step
    def step(self, gpu_util) -> PowerResult:
        """Power, throttling and temperatures at ``gpu_util`` (per GPU, 0-1, or a scalar).

        A rack whose demand ``D = G + H`` (GPU part, host part) exceeds its limit ``C`` (the
        lower of its power cap and its cooling share) throttles its accelerators so the rack
        meets the limit: ``factor = (C - H) / G``, at least :data:`THROTTLE_FLOOR`.  Hosts are
        not throttled.  The factor scales both the GPUs' power and their speed.
        """
        plan = self.plan
        gpu, host = _split_kw(self._cols, _util(plan, gpu_util), plan.n_racks)
        demand = gpu + host
        cooling = self.rack_cooling_kw()
        cap = np.minimum(self.caps_kw, cooling)
        over = demand > cap
        factor = np.ones(plan.n_racks)
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(gpu > 0, (cap - host) / gpu, 0.0)
        factor[over] = np.clip(need[over], THROTTLE_FLOOR, 1.0)
        drawn = host + gpu * factor
        over_cap = drawn > cap * (1.0 + 1e-9)

        # steady state: airflow sized for the provisioned power gives DESIGN_DELTA_T at it;
        # heat the cooling cannot remove recirculates and warms the inlet, by at most one
        # design rise (past that the accelerators' own thermal protection takes over)
        with np.errstate(divide="ignore", invalid="ignore"):
            rise = np.where(self.base_caps_kw > 0, drawn / self.base_caps_kw, 0.0)
            excess = np.where(cooling > 0, (drawn - cooling) / cooling, np.inf)
        excess = np.where(drawn > 0, np.clip(excess, 0.0, 1.0), 0.0)
        inlet = SUPPLY_AIR_C + DESIGN_DELTA_T_K * excess
        outlet = inlet + DESIGN_DELTA_T_K * rise

        it_mw = (float(drawn.sum()) + self.network_kw) / 1e3
        return PowerResult(
            rack_kw=drawn, rack_demand_kw=demand, rack_cap_kw=cap, rack_throttle=factor,
            gpu_throttle=factor[self._cols.rack], over_cap=over_cap, inlet_c=inlet,
            outlet_c=outlet, network_kw=self.network_kw, it_mw=it_mw,
            facility_mw=it_mw * self.pue,
        )


def power_report(samples, *, top: int = 10, until: float | None = None) -> dict:
    """Peak and mean power, energy and per-rack peaks over ``(t_s, PowerResult)`` samples.

    Each sample holds until the next (the engine steps power periodically and the load is
    constant in between), so energy is ``sum(MW_i x (t_{i+1} - t_i))``; the last sample holds
    until ``until`` (s; the end of the run), or closes the period when it is not given.  With
    an adaptive tick the last sample may come hours before the end: without ``until`` two runs
    of the same length would be integrated over different periods.  Samples are read once, in
    time order, so a generator will do.

    Returns a JSON-safe dict: ``it_mw`` and ``facility_mw`` (peak, mean over time),
    ``energy_mwh`` (IT and facility), ``rack_peak_kw`` (max, p99 over racks, the ``top`` racks
    by peak), ``throttled_gpu_hours`` (GPU-hours at a throttle factor below 1) and
    ``throttle_lost_gpu_hours`` (GPU-hours of speed lost, ``sum (1 - factor)``).
    """
    period_s = it_mwh = fac_mwh = throttled_h = lost_h = 0.0
    it_peak = fac_peak = 0.0
    rack_peak = None
    prev_t, prev = None, None
    for t, res in samples:
        if prev is not None:
            dt = float(t) - prev_t
            if dt < 0:
                raise ValueError("power samples must be in time order")
            period_s += dt
            it_mwh += prev.it_mw * dt / 3600.0
            fac_mwh += prev.facility_mw * dt / 3600.0
            throttled_h += prev.throttled_gpus * dt / 3600.0
            lost_h += float(np.sum(1.0 - prev.gpu_throttle)) * dt / 3600.0
        it_peak = max(it_peak, res.it_mw)
        fac_peak = max(fac_peak, res.facility_mw)
        rack_peak = (res.rack_kw.copy() if rack_peak is None
                     else np.maximum(rack_peak, res.rack_kw))
        prev_t, prev = float(t), res
    if until is not None and prev is not None and float(until) > prev_t:
        dt = float(until) - prev_t
        period_s += dt
        it_mwh += prev.it_mw * dt / 3600.0
        fac_mwh += prev.facility_mw * dt / 3600.0
        throttled_h += prev.throttled_gpus * dt / 3600.0
        lost_h += float(np.sum(1.0 - prev.gpu_throttle)) * dt / 3600.0
    hours = period_s / 3600.0
    if hours > 0:
        it_mean, fac_mean = it_mwh / hours, fac_mwh / hours
    else:
        it_mean = prev.it_mw if prev is not None else 0.0
        fac_mean = prev.facility_mw if prev is not None else 0.0
    if rack_peak is None or rack_peak.size == 0:
        racks = {"max": 0.0, "p99": 0.0, "top": []}
    else:
        order = np.argsort(-rack_peak, kind="stable")[:top]
        racks = {"max": round(float(rack_peak.max()), 2),
                 "p99": round(float(np.percentile(rack_peak, 99)), 2),
                 "top": [{"rack": int(r), "kw": round(float(rack_peak[r]), 2)} for r in order]}
    return {
        "hours": round(hours, 4),
        "it_mw": {"peak": round(it_peak, 4), "mean": round(it_mean, 4)},
        "facility_mw": {"peak": round(fac_peak, 4), "mean": round(fac_mean, 4)},
        "energy_mwh": {"it": round(it_mwh, 4), "facility": round(fac_mwh, 4)},
        "rack_peak_kw": racks,
        "throttled_gpu_hours": round(throttled_h, 3),
        "throttle_lost_gpu_hours": round(lost_h, 3),
    }
