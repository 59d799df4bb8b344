"""A member cluster's place in its grid, kept across a rebuild and guarded on delete (issue 30).

A grid's owned site is an inventory cluster named as the place its WAN links name
(:mod:`twin.inventory.grid_models`).  Rebuilding the cluster (``build_cluster --replace``,
``cluster_plan_write(replace=True)``; an import that replaces it) deletes its rows and writes
new ones: :func:`membership_keep` reads what made it a site of its grid before the delete
(the grid, ``jurisdiction``, ``power_price_per_kwh``, ``stacks``; its Site's ``region`` and
``pue``; its :class:`~twin.inventory.grid_models.SiteMirror`) and :func:`membership_restore`
puts it on the new cluster.  Deleting a member cluster while WAN links name it would leave
links to a missing place: :func:`delete_refusal` says why it is refused, in one line.
"""

from __future__ import annotations

from twin.inventory.grid_models import SiteMirror, links_naming
from twin.inventory.models import Cluster, Site

_MIRROR_FIELDS = ("kind", "slurm_conf", "rest_url", "rest_user", "token_env", "poll_s",
                  "timeout_s")


def delete_refusal(cluster: Cluster) -> str | None:
    """Why ``cluster`` may not be deleted (a site of a grid that WAN links name), or None."""
    if cluster.grid_id is None:
        return None
    named = links_naming(cluster.grid_id, cluster.name)
    if not named:
        return None
    return (f"cluster {cluster.name} is a site of grid {cluster.grid.name} and its WAN links "
            f"name it ({', '.join(named)}): remove those links before deleting the cluster")


def membership_keep(*, cluster: Cluster, successor: str | None = None) -> dict:
    """What makes ``cluster`` a site of its grid, read before it is deleted.

    ``successor``: the name of the cluster that replaces it (a rebuild); unless it is the
    same name, a member cluster that WAN links name is refused with ``ValueError`` (one line),
    and nothing is read or changed.
    """
    if successor != cluster.name:
        why = delete_refusal(cluster)
        if why:
            raise ValueError(why)
    site = Site.objects.filter(cluster=cluster).order_by("id").first()
    mirror = SiteMirror.objects.filter(cluster=cluster).values(*_MIRROR_FIELDS).first()
    return {"grid_id": cluster.grid_id, "jurisdiction": cluster.jurisdiction,
            "power_price_per_kwh": cluster.power_price_per_kwh, "stacks": list(cluster.stacks),
            "site": None if site is None else {"region": site.region, "pue": site.pue},
            "mirror": mirror}


def membership_restore(*, cluster: Cluster, kept: dict | None, site: bool = True) -> None:
    """Put ``kept`` (:func:`membership_keep`) on ``cluster``, its successor; ``site``: also
    its first Site's region and PUE (a plan carries none; an import brings its own)."""
    if kept is None:
        return
    if kept["grid_id"] is not None:
        Cluster.objects.filter(pk=cluster.pk).update(
            grid_id=kept["grid_id"], jurisdiction=kept["jurisdiction"],
            power_price_per_kwh=kept["power_price_per_kwh"], stacks=kept["stacks"])
        first = Site.objects.filter(cluster=cluster).order_by("id").first()
        if site and kept["site"] is not None and first is not None:
            Site.objects.filter(pk=first.pk).update(**kept["site"])
    if kept["mirror"] is not None:
        SiteMirror.objects.create(cluster=cluster, **kept["mirror"])
    cluster.refresh_from_db()
