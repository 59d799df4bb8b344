"""A compute grid: several owned sites and cloud regions run as one logical pool (issue 30).

The shape both sides agree on, :mod:`scheduler.hardware.grid_spec` (what the inventory's adapter
hands the core, and what a preset builds), sits with the hardware; this package holds the
grid's behaviour above the engine: one engine per place on one clock, placement across
places, WAN transfers, region loss (a layer between ``simulate`` and ``engine``).
"""
