"""What the engine knows now: columnar cluster state, job runs, and the GPU-second ledger."""
