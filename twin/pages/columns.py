"""Live columns: what the running engine last reported about inventory rows.

The admin's "live (engine)" column (:class:`LiveColumn`) shows it beside the operator-set
status (the inventory's ``status`` field): each changelist page reads the engine's placement
once (:func:`twin.live.selectors.live_view`) and asks it about all of the page's rows at once; the
page's subtitle says as of when.

The node and job pages' GPU columns (:func:`node_gpu_rows`, :func:`job_gpu_ranges`) read which
job holds each GPU from the placement's ``gpu_runs`` (the engine's ``gpu_owner``, as GPU-id
runs) and a node's telemetry from the DCGM model (:mod:`twin.metrics.dcgm`), for the GPUs of the
nodes asked about only: nothing here walks the fleet's GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin

from scheduler.frame_schema import StoredFrame
from scheduler.live import in_ranges
from scheduler.placement_schema import LivePlacement, PlacedJob
from twin.live import selectors
from twin.metrics.dcgm import DcgmInventory, HostDown, HostNotFound, dcgm_readings

_ATTR = "_twin_live_status"


class LiveColumn:
    """Mixin for a ``ModelAdmin``: list ``live_engine`` (and ``operator_status``) in
    ``list_display`` or ``readonly_fields`` and name the :class:`~twin.live.selectors.LiveView`
    question in :meth:`live_statuses`."""

    def live_statuses(self, view: selectors.LiveView, objs: list) -> dict:
        """``{pk: LiveStatus}`` for ``objs`` (plain values go to the view, not instances)."""
        raise NotImplementedError

    def changelist_view(self, request, extra_context=None):
        view = request.twin_live_view = selectors.live_view()
        return super().changelist_view(request, {"subtitle": view.caption(),
                                                 **(extra_context or {})})

    def get_changelist_instance(self, request):
        cl = super().get_changelist_instance(request)
        view = getattr(request, "twin_live_view", None) or selectors.live_view()
        rows = list(cl.result_list)  # the page's rows, evaluated once: the template reuses them
        found = self.live_statuses(view, rows)
        for obj in rows:
            setattr(obj, _ATTR, found[obj.pk])
        return cl

    @admin.display(description="live (engine)")
    def live_engine(self, obj) -> str:
        if obj is None or obj.pk is None:
            return "-"
        live = getattr(obj, _ATTR, None)
        if live is None:  # a change form: this row alone
            view = selectors.live_view()
            live = self.live_statuses(view, [obj])[obj.pk]
            return str(live) if view.when == selectors.NO_ENGINE else f"{live} (at {view.when})"
        return str(live)

    @admin.display(description="status (operator)", ordering="status")
    def operator_status(self, obj) -> str:
        return obj.get_status_display()


# ----------------------------------------------------------------- GPUs of a node or a job
def _clip(runs, first: int, last: int) -> list[list[int]]:
    """The parts of the ``[a, b]`` runs inside ``[first, last]``."""
    return [[max(a, first), min(b, last)] for a, b in runs or () if a <= last and b >= first]


@dataclass(frozen=True)
class GpuLive:
    """One GPU of a node as the live engine last reported it (``None``: not reported)."""

    index: int
    job: str | None
    service: str | None
    util_pct: float | None
    power_w: float | None
    temp_c: float | None
    xid: int | None


def node_gpu_rows(*, placement: LivePlacement | None, frame: StoredFrame | None, cluster: str,
                  node: int, hostname: str, model: str, first_gpu: int, n_gpus: int,
                  nic_gbps: float) -> tuple[list[GpuLive], str, bool]:
    """The GPUs of engine node ``node`` (engine GPU ids ``first_gpu`` onwards): the job or
    inference service holding each and its DCGM telemetry (utilisation %, power W,
    temperature C, XID), why telemetry is missing ("" when it is there), and whether the
    engine reported which GPU each job (and inference service) on the node holds.

    Holders come from the placement's ``gpu_runs`` and ``serving``; where the engine did not
    report them (``None``: an older engine's placement, :mod:`twin.live.stored`) no GPU gets
    a holder and there is no telemetry (it would need them).  Telemetry is
    :func:`twin.metrics.dcgm.dcgm_readings` for this node alone, so the page reads what
    ``/metrics/dcgm?hostname=`` exports.
    """
    last = first_gpu + n_gpus - 1
    job_of: dict[int, str] = {}
    service_of: dict[int, str] = {}
    telemetry, why = {}, ""
    if placement is None:
        return ([GpuLive(i, None, None, None, None, None, None) for i in range(n_gpus)],
                "no live engine has reported yet", False)
    here = {name: j for name, j in placement["jobs"].items() if in_ranges(node, j["nodes"])}
    reported = (placement["gpus_down"] is not None and placement["serving"] is not None
                and all(j["gpu_runs"] is not None for j in here.values()))
    local_jobs: dict[str, PlacedJob] = {}
    if reported:
        for name, j in here.items():
            mine = _clip(j["gpu_runs"], first_gpu, last)
            for a, b in mine:
                job_of.update((g - first_gpu, name) for g in range(a, b + 1))
            if mine:
                local_jobs[name] = {**j, "gpu_runs": [[a - first_gpu, b - first_gpu]
                                                      for a, b in mine]}
        for name, runs in (placement["serving"] or {}).items():
            for a, b in _clip(runs, first_gpu, last):
                service_of.update((g - first_gpu, name) for g in range(a, b + 1))
    if not reported:
        why = "this engine does not report which GPUs its jobs hold"
    else:
        local: LivePlacement = {
            **placement, "jobs": local_jobs,
            "down": [[0, 0]] if in_ranges(node, placement["down"]) else [],
            "gpus_down": [[a - first_gpu, b - first_gpu] for a, b in
                          _clip(placement["gpus_down"], first_gpu, last)]}
        inv = DcgmInventory(cluster, ((hostname, model, n_gpus, nic_gbps),))
        try:
            r = dcgm_readings(inv, placement=local, frame=frame, hostname=hostname)
        except HostNotFound:
            why = f"{model} is not an NVIDIA GPU: there is no DCGM exporter to model"
        except HostDown:
            why = "the node is down: its exporter does not answer"
        else:
            v = r.values
            for k, g in enumerate(r.gpus.tolist()):
                telemetry[g] = (float(v["DCGM_FI_DEV_GPU_UTIL"][k]),
                                float(v["DCGM_FI_DEV_POWER_USAGE"][k]),
                                float(v["DCGM_FI_DEV_GPU_TEMP"][k]),
                                int(v["DCGM_FI_DEV_XID_ERRORS"][k]))
    return [GpuLive(i, job_of.get(i), service_of.get(i), *telemetry.get(i, (None,) * 4))
            for i in range(n_gpus)], why, reported


def index_text(indices: list[int]) -> str:
    """GPU indices as ranges: ``[0, 1, 2, 3, 6]`` -> ``"0-3,6"``."""
    parts, start = [], None
    for k, i in enumerate(indices):
        if start is None:
            start = i
        if k + 1 == len(indices) or indices[k + 1] != i + 1:
            parts.append(str(i) if i == start else f"{start}-{i}")
            start = None
    return ",".join(parts)


def job_gpu_ranges(runs: list[list[int]], nodes: list[dict]) -> list[dict]:
    """A job's GPUs on ``nodes`` (each with its engine ``id``, ``hostname``, ``first_gpu`` id
    and ``gpus``: :func:`twin.inventory.selectors.job_nodes_get`) from its ``gpu_runs``: per
    node that holds any, ``indices`` (in the node) and ``text`` (``"dgx-0012:0-7"``)."""
    out = []
    for node, host, first, count in ((n["id"], n["hostname"], n["first_gpu"], n["gpus"])
                                     for n in nodes):
        indices = [g - first for a, b in _clip(runs, first, first + count - 1)
                   for g in range(a, b + 1)]
        if indices:
            out.append({"node": node, "hostname": host, "indices": indices,
                        "text": f"{host}:{index_text(indices)}"})
    return out
