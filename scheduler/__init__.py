"""ClusterTwin's pure core: hardware, fabric, storage, workloads, scheduling, simulation.

Nothing in this package imports Django; ``twin.inventory.adapter`` is the one adapter between the
ORM and these arrays and dataclasses.
"""
