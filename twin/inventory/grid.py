"""The adapter between a grid's rows and the core's :class:`~scheduler.hardware.grid_spec.GridSpec`.

``grid_spec_read`` gives the spec and one :class:`~scheduler.hardware.cluster.ClusterPlan` per
owned site (each member cluster read by :func:`~twin.inventory.adapter.cluster_plan_read`);
``grid_write`` writes a spec and its plans back (each site through
:func:`~twin.inventory.adapter.cluster_plan_write`), in one transaction: a refusal writes
nothing.  A site is its cluster: its place name is the cluster's name (``SiteSpec.cluster``
names it too), its region and PUE are its (first) :class:`Site` row's, its jurisdiction,
energy price and stacks the cluster's.  A site read back carries no ``groups`` or
``fabric_kw`` (its ``fabric_kind`` and ``storage`` are its plan's): its layout is
its plan.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.core.exceptions import ValidationError
from django.db import transaction

from scheduler.hardware.catalog import CATALOG
from scheduler.hardware.cluster import ClusterPlan
from scheduler.hardware.grid_spec import CloudRegionSpec, GridSpec, SiteSpec, WanLinkSpec
from twin.inventory.adapter import accelerator_models_sync, cluster_plan_read, cluster_plan_write
from twin.inventory.models import Cluster, Grid, GridCloudRegion, Site, WanLink

SETTINGS = ("description", "weight_cost", "weight_start", "weight_gravity",
            "checkpoint_replication_s")
"""The grid's own fields beside its name (what ``GridSpec`` does not carry)."""
SITE_FIELDS = ("jurisdiction", "power_price_per_kwh", "stacks")
"""A member cluster's grid fields."""
CLOUD_FIELDS = ("provider", "region", "jurisdiction", "model", "quota_gpus",
                "on_demand_per_gpu_hour", "spot_per_gpu_hour", "spot_interruptions_per_hour",
                "startup_s", "stacks")
LINK_FIELDS = ("a", "b", "gbps", "latency_ms", "egress_per_gb", "egress_back_per_gb")


def grid_spec_read(*, grid: Grid) -> tuple[GridSpec, dict[str, ClusterPlan]]:
    """The grid as the core runs it: its spec, and each owned site's plan by place name.

    Sites come in cluster id order, cloud regions and WAN links in id order.  Raises
    ``ValueError`` (one line) for a grid the core cannot run: no member cluster, a member the
    engine cannot run, a cloud model outside the catalog, a WAN link naming no place.
    """
    sites, plans = [], {}
    for cluster in grid.clusters.order_by("id"):
        plan = cluster_plan_read(cluster=cluster)
        site = Site.objects.filter(cluster=cluster).order_by("id").first()
        sites.append(SiteSpec(
            name=cluster.name, region=site.region if site else "",
            jurisdiction=cluster.jurisdiction, fabric_kind=cluster.fabric_kind,
            storage=plan.storage, pue=site.pue if site else 1.2,
            power_price_per_kwh=cluster.power_price_per_kwh, stacks=tuple(cluster.stacks),
            cluster=cluster.name))
        plans[cluster.name] = plan
    clouds = []
    for r in grid.cloud_regions.select_related("accelerator_model").order_by("id"):
        if r.accelerator_model.name not in CATALOG:
            raise ValueError(f"grid {grid.name}: cloud region {r.place}: accelerator model "
                             f"{r.accelerator_model.name!r} is not in the catalog")
        clouds.append(CloudRegionSpec(
            provider=r.provider, region=r.region, jurisdiction=r.jurisdiction,
            model=r.accelerator_model.name, quota_gpus=r.quota_gpus,
            on_demand_per_gpu_hour=r.on_demand_per_gpu_hour,
            spot_per_gpu_hour=r.spot_per_gpu_hour,
            spot_interruptions_per_hour=r.spot_interruptions_per_hour,
            startup_s=r.startup_s, stacks=tuple(r.stacks)))
    links = tuple(WanLinkSpec(a=w.a, b=w.b, gbps=w.gbps, latency_ms=w.latency_ms,
                              egress_per_gb=w.egress_per_gb,
                              egress_back_per_gb=w.egress_back_per_gb)
                  for w in grid.wan_links.order_by("id"))
    spec = GridSpec(name=grid.name, sites=tuple(sites), clouds=tuple(clouds), links=links)
    spec.check()
    return spec, plans


def grid_settings_read(*, grid: Grid) -> dict:
    """The grid's placement weights and checkpoint replication interval, as plain values:
    ``{"weight_cost", "weight_start", "weight_gravity"}`` (floats, not negative, one at
    least positive) and ``checkpoint_replication_s`` (int seconds; 0: never)."""
    return {k: getattr(grid, k) for k in SETTINGS if k != "description"}


def errors_of(exc: ValidationError, where: str) -> list[str]:
    """One line per message of a model's validation, each naming ``where`` and the field."""
    if not hasattr(exc, "error_dict"):
        return [f"{where}: {m}" for m in exc.messages]
    return [f"{where}: {m}" if field == "__all__" else f"{where}: {field}: {m}"
            for field, messages in exc.message_dict.items() for m in messages]


def _saved(row, where: str, errors: list[str]) -> bool:
    """Validate ``row`` as the admin would and save it; note the errors instead."""
    try:
        row.full_clean()
    except ValidationError as exc:
        errors.extend(errors_of(exc, where))
        return False
    row.save()
    return True


def grid_rows_write(*, name: str, settings: Mapping, replace: bool,
                    members: list[tuple[Cluster, dict]], clouds: list[dict],
                    links: list[dict]) -> tuple[Grid | None, list[str]]:
    """Make (or with ``replace``, remake) grid ``name`` of clusters already written.

    ``members``: each cluster with its grid fields (:data:`SITE_FIELDS`, and optionally
    ``region``/``pue`` for its site row); ``clouds``: :data:`CLOUD_FIELDS` dicts (``model`` a
    catalog name); ``links``: :data:`LINK_FIELDS` dicts.  Returns the grid and every problem
    found, one line each naming the row; the caller's transaction must roll back on any.
    A replaced grid's former members are left as clusters outside any grid.
    """
    errors: list[str] = []
    grid = Grid.objects.filter(name=name).first()
    if grid is not None and not replace:
        return None, [f"grid: grid {name!r} already exists; pass --replace to replace it"]
    if grid is None:
        grid = Grid(name=name)
    else:
        grid.clusters.update(grid=None)
        grid.cloud_regions.all().delete()
        grid.wan_links.all().delete()
    for key in SETTINGS:
        if key in settings:
            setattr(grid, key, settings[key])
    if not _saved(grid, "grid", errors):
        return None, errors
    for i, (cluster, attrs) in enumerate(members):
        where = f"sites[{i}] ({cluster.name})"
        if cluster.grid_id is not None and cluster.grid_id != grid.pk:
            errors.append(f"{where}: the cluster is a site of grid {cluster.grid.name}")
            continue
        site = Site.objects.filter(cluster=cluster).order_by("id").first()
        if site is not None and ("region" in attrs or "pue" in attrs):
            site.region, site.pue = attrs.get("region", site.region), attrs.get("pue", site.pue)
            _saved(site, f"{where} site", errors)
        cluster.grid = grid
        for key in SITE_FIELDS:
            if key in attrs:
                setattr(cluster, key, attrs[key])
        _saved(cluster, where, errors)
    if not members:
        errors.append("sites: a grid needs at least one owned site")
    models = accelerator_models_sync()
    for i, c in enumerate(clouds):
        where = f"clouds[{i}] ({c.get('provider')}/{c.get('region')})"
        if not isinstance(c.get("model"), str) or c["model"] not in models:
            errors.append(f"{where}: model: {c.get('model')!r} is not a catalog accelerator")
            continue
        fields = {k: c[k] for k in CLOUD_FIELDS if k in c and k != "model"}
        _saved(GridCloudRegion(grid=grid, accelerator_model=models[c["model"]], **fields),
               where, errors)
    # a link is checked against the places meant, so that a refused region is one error
    places = tuple(c.name for c, _ in members) + tuple(
        f"{c.get('provider')}/{c.get('region')}" for c in clouds)
    for i, w in enumerate(links):
        row = WanLink(grid=grid, **{k: w[k] for k in LINK_FIELDS if k in w})
        row.pending_places = places
        _saved(row, f"links[{i}] ({w.get('a')}-{w.get('b')})", errors)
    return grid, errors


@transaction.atomic
def grid_write(spec: GridSpec, plans: Mapping[str, ClusterPlan], *, replace: bool = False,
               settings: Mapping | None = None) -> Grid:
    """Write grid ``spec`` with each owned site's plan (``plans[site.name]``) as its cluster.

    Every site is written by ``cluster_plan_write`` as a cluster named as the site (its
    ``cluster``, if given, must be that name; the plan's name too); cloud regions and WAN links
    as rows of the grid.  ``replace`` replaces a grid and clusters of those names (a replaced
    grid's other clusters leave it); ``settings`` sets the grid's own fields
    (:data:`SETTINGS`; a replaced grid keeps those not given).  Raises ``ValueError`` (one
    line) and writes nothing when the spec, a plan or a row is refused.
    """
    spec.check()
    odd = sorted(set(settings or {}) - set(SETTINGS))
    if odd:
        raise ValueError(f"grid {spec.name}: unknown settings {', '.join(odd)} (known: "
                         f"{', '.join(SETTINGS)})")
    if not replace and Grid.objects.filter(name=spec.name).exists():
        raise ValueError(f"grid {spec.name!r} already exists; pass replace to replace it")
    names = {s.name for s in spec.sites}
    if set(plans) != names:
        odd = sorted(set(plans) ^ names)
        raise ValueError(f"grid {spec.name}: plans and sites differ: {', '.join(odd)}")
    for site in spec.sites:
        if site.cluster not in ("", site.name) or plans[site.name].name != site.name:
            raise ValueError(f"grid {spec.name}: site {site.name}: its cluster and its plan "
                             "must be named as the site")
        other = Cluster.objects.filter(name=site.name).exclude(grid=None) \
            .exclude(grid__name=spec.name).values_list("grid__name", flat=True).first()
        if other is not None:
            raise ValueError(f"grid {spec.name}: cluster {site.name} is a site of grid {other}")
    members = []
    for site in spec.sites:
        cluster = cluster_plan_write(plans[site.name], replace=replace)
        members.append((cluster, {"region": site.region, "pue": site.pue,
                                  "jurisdiction": site.jurisdiction,
                                  "power_price_per_kwh": site.power_price_per_kwh,
                                  "stacks": list(site.stacks)}))
    clouds = [{"provider": c.provider, "region": c.region, "jurisdiction": c.jurisdiction,
               "model": c.model, "quota_gpus": c.quota_gpus,
               "on_demand_per_gpu_hour": c.on_demand_per_gpu_hour,
               "spot_per_gpu_hour": c.spot_per_gpu_hour,
               "spot_interruptions_per_hour": c.spot_interruptions_per_hour,
               "startup_s": c.startup_s, "stacks": list(c.stacks)} for c in spec.clouds]
    links = [{"a": w.a, "b": w.b, "gbps": w.gbps, "latency_ms": w.latency_ms,
              "egress_per_gb": w.egress_per_gb, "egress_back_per_gb": w.egress_back_per_gb}
             for w in spec.links]
    grid, errors = grid_rows_write(name=spec.name, settings=dict(settings or {}),
                                   replace=replace, members=members, clouds=clouds,
                                   links=links)
    if errors:
        raise ValueError(f"grid {spec.name}: {errors[0]}")
    return grid
