"""Studies on Dask (runner), their files (report) and their rows in the app (store)."""
