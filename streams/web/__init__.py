"""The worker's HTTP API: a route table (routes), pure parameter parsing (params), one view module per resource."""
