"""For developers and demos: the demo, the simulated cluster and workload, synthetic data, benchmarks (bench/). Imported by cli only."""
