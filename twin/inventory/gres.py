"""Slurm GRES types the catalog does not name, mapped by the admin to catalog models.

A cluster imported from Slurm keeps its map (:attr:`twin.inventory.models.Cluster.gres_map`):
``TYPE=MODEL`` (``a100=A100-SXM4-80GB``), ``gpu=MODEL`` for untyped ``gpu:N``, and
``TYPE=MODEL/K`` for MIG slices, ``K`` of them per GPU (``1g.10gb=A100-SXM4-80GB/7``).
"""

from __future__ import annotations

from scheduler.hardware.catalog import CATALOG


def gres_map_parse(text: str | dict | None) -> dict[str, str]:
    """``TYPE=MODEL[/K],...`` (or a mapping) checked: models from the catalog, ``K`` >= 1;
    :class:`ValueError` naming the first bad entry.

    >>> gres_map_parse("a100=a100-sxm4-80gb, 1g.10gb=A100-SXM4-80GB/7")
    {'a100': 'A100-SXM4-80GB', '1g.10gb': 'A100-SXM4-80GB/7'}
    """
    if text is None or text == "":
        return {}
    items = text.items() if isinstance(text, dict) else (
        part.split("=", 1) if "=" in part else (part, "") for part in str(text).split(",")
        if part.strip())
    out = {}
    by_lower = {name.lower(): name for name in CATALOG}
    for key, value in items:
        key, value = str(key).strip().lower(), str(value).strip()
        model, _, slices = value.partition("/")
        name = by_lower.get(model.strip().lower())
        if not key or name is None:
            raise ValueError(f"GRES map entry {key or '?'}={value or '?'}: give TYPE=MODEL with "
                             f"MODEL one of {', '.join(CATALOG)}")
        if slices and not (slices.isdigit() and int(slices) >= 1):
            raise ValueError(f"GRES map entry {key}={value}: the slices per GPU after / must "
                             "be a whole number >= 1")
        out[key] = name + (f"/{int(slices)}" if slices else "")
    return out
