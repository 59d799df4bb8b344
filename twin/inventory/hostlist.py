"""Slurm hostlist expressions, for the inventory's imports and exports.

The parser lives in the core (:mod:`scheduler.hardware.hostlist`), which reads ``slurm.conf``
node lists too; this module names it for the web side.
"""

from scheduler.hardware.hostlist import expand, hostlist

__all__ = ["expand", "hostlist"]
