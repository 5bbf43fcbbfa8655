"""What connects cnsched to real machines and the workload managers that run its decisions: the node
agent (a machine's accelerators, memory and free cards as compute reports) and the Slurm bridge
(inventory from Slurm, placements as jobs, job states back as task events; the adapter boundary leaves
room for a Kubernetes binder)."""
