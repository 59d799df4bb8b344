"""A grid as a JSON document: exported with :func:`grid_export_json`, imported with
:func:`grid_import` (``manage.py import_inventory GRID.json`` takes a document with a ``grid``
object this way).

Layout; each site's ``inventory`` is a cluster in the JSON import layout of
:mod:`twin.inventory.importer` (its ``sites`` rows hold the region and PUE)::

    {"grid": {"name"*: "eu-grid", "description": "", "weight_cost": 1.0, "weight_start": 1.0,
              "weight_gravity": 1.0, "checkpoint_replication_s": 3600},
     "sites": [{"jurisdiction"*: "EU", "power_price_per_kwh": 0.08, "stacks": ["cuda12"],
                "inventory"*: {"cluster": {"name"*: "paris", ...}, "sites": [...], ...}}],
     "clouds": [{"provider"*: "aws", "region"*: "eu-central-1", "jurisdiction"*: "EU",
                 "model"*: "H100-SXM", "quota_gpus"*: 256, "on_demand_per_gpu_hour"*: 6.9,
                 "spot_per_gpu_hour": 2.5, "spot_interruptions_per_hour": 0.05,
                 "startup_s": 600, "stacks": []}],
     "links": [{"a"*: "paris", "b"*: "aws/eu-central-1", "gbps"*: 100, "latency_ms"*: 12,
                "egress_per_gb": 0.02, "egress_back_per_gb": null}]}

A place is a site's cluster name or a cloud region's ``provider/region``.  Every row is
checked (as the admin checks it) before the import commits: an error names the row
(``sites[1].inventory: nodes[3]: ...``, ``links[0] (paris-aws/eu): gbps: must be positive``)
and nothing is written.  The cluster layout keeps what it keeps (not storage systems or a
cluster's burst pools, as for one cluster).
"""

from __future__ import annotations

from django.db import transaction

from twin.inventory.formats import LayoutError, inventory_export_json, inventory_from_json
from twin.inventory.grid import CLOUD_FIELDS, LINK_FIELDS, SETTINGS, SITE_FIELDS, grid_rows_write
from twin.inventory.import_write import inventory_import
from twin.inventory.importer import InventoryError, model_name
from twin.inventory.models import Cluster, Grid

SITE_KEYS = (*SITE_FIELDS, "inventory")


def is_grid_document(doc) -> bool:
    """Whether a JSON document is a grid (it has a ``grid`` object) rather than a cluster."""
    return isinstance(doc, dict) and "grid" in doc


def grid_export_json(*, grid: Grid) -> dict:
    """A grid's rows in the layout above (importing it gives the same rows)."""
    return {
        "grid": {"name": grid.name, **{k: getattr(grid, k) for k in SETTINGS}},
        "sites": [{**{k: getattr(c, k) for k in SITE_FIELDS},
                   "inventory": inventory_export_json(cluster=c)}
                  for c in grid.clusters.order_by("id")],
        "clouds": [{**{k: getattr(r, k) for k in CLOUD_FIELDS if k != "model"},
                    "model": r.accelerator_model.name}
                   for r in grid.cloud_regions.select_related("accelerator_model")
                   .order_by("id")],
        "links": [{k: getattr(w, k) for k in LINK_FIELDS} for w in grid.wan_links.order_by("id")],
    }


def _objects(doc: dict, key: str, known: tuple[str, ...], errors: list[str]) -> list[dict]:
    """The objects of list ``key``, each with only ``known`` keys (else an error each)."""
    items = doc.get(key, [])
    if not isinstance(items, list):
        errors.append(f"{key}: must be a list")
        return []
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append(f"{key}[{i}]: must be an object")
            continue
        odd = sorted(set(item) - set(known))
        if odd:
            errors.append(f"{key}[{i}]: unknown field(s) {', '.join(odd)} (known: "
                          f"{', '.join(known)})")
            continue
        out.append(item)
    return out


@transaction.atomic
def grid_import(doc, *, source: str = "", replace: bool = False) -> Grid:
    """Check a grid document and write it, all or nothing.

    Each site's cluster is imported as ``import_inventory`` imports one (``replace``
    replaces clusters and a grid of those names).  Raises :class:`InventoryError` with one
    line per problem (each naming ``source`` and the row); nothing is written then.
    """
    at = f"{source}: " if source else ""
    if not is_grid_document(doc) or not isinstance(doc["grid"], dict):
        raise InventoryError([f"{at}a grid document is an object whose grid is an object"])
    errors: list[str] = []
    odd = sorted(set(doc) - {"grid", "sites", "clouds", "links"})
    if odd:
        errors.append(f"unknown field(s) {', '.join(odd)} (known: grid, sites, clouds, links)")
    head = doc["grid"]
    odd = sorted(set(head) - {"name", *SETTINGS})
    if odd:
        errors.append(f"grid: unknown field(s) {', '.join(odd)} (known: name, "
                      f"{', '.join(SETTINGS)})")
    name = head.get("name")
    if not isinstance(name, str) or not name:
        errors.append("grid: name is missing")
    sites = _objects(doc, "sites", SITE_KEYS, errors)
    clouds = _objects(doc, "clouds", CLOUD_FIELDS, errors)
    links = _objects(doc, "links", LINK_FIELDS, errors)
    if errors:
        raise InventoryError([at + e for e in errors])
    members = []
    for i, site in enumerate(sites):
        where = f"sites[{i}].inventory"
        try:
            inv = inventory_from_json(site.get("inventory"), source=where)
            taken = Cluster.objects.filter(name=inv.cluster.data.get("name")) \
                .exclude(grid=None).exclude(grid__name=name).first()
            if taken is not None:
                errors.append(f"{where}: cluster {taken.name!r} is a site of grid "
                              f"{taken.grid.name}")
                continue
            cluster = inventory_import(inv, replace=replace)
        except LayoutError as exc:
            errors.append(str(exc))
            continue
        except InventoryError as exc:
            errors.extend(f"{where}: {line}" for line in exc.errors)
            continue
        members.append((cluster, {k: site[k] for k in SITE_FIELDS if k in site}))
    if errors:
        raise InventoryError([at + e for e in errors])
    clouds = [{**c, "model": model_name(c.get("model")) or c.get("model")}
              if isinstance(c.get("model"), str) else c for c in clouds]
    _, errors = grid_rows_write(name=name, settings={k: head[k] for k in SETTINGS if k in head},
                                replace=replace, members=members, clouds=clouds, links=links)
    if errors:
        raise InventoryError([at + e for e in errors])
    return Grid.objects.get(name=name)
