"""DuckDB (and Parquet) writers and readers. Imports only `schemas` of ours."""
