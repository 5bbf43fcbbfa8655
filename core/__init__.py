"""Pure computation on numpy arrays: no Kafka, no Faust, no DuckDB, no files, no clock."""
