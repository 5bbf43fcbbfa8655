"""Processes we run: the embedded broker, child processes bound to their parent, the DuckDB sink runner."""
