"""The worker's Faust agents and tables: ingest and windows, the network and compute views, dead letters, task records; scheduling/ holds the scheduler."""
