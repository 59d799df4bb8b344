"""Physical layer: accelerator catalog and cluster shapes."""
