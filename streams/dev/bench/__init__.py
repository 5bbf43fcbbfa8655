"""`cnsched bench ...`: one module per benchmark, each timing ours beside its baseline in one run
and returning the figures (with ratios) as a dict: ingest, scoring, reschedule, sink, forecast, battery."""
