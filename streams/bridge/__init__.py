"""Bridges between cnsched and the workload managers that run its decisions (Slurm first; the
adapter boundary leaves room for a Kubernetes binder): inventory from the manager, placements to it,
job states back as task events."""
