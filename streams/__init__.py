"""Everything around the Faust app, in rooms by role (ARCHITECTURE.md has the map):

- top level: the composition root (`app`) and shared plumbing (`config`, `kafka`, `metrics`, `logs`,
  `client` — the HTTP API's client for the CLI, the demo and tests);
- `adapters/`: messages and records <-> core's arrays;
- `worker/`: agents and tables (ingest, windows, state views, task book) and `worker/scheduling/`;
- `web/`: the HTTP API;  `analytics/`: forecasts, alphas, power, backtests over stored history;
- `runtime/`: embedded broker, child processes, the sink runner;  `probe/`: probe agent and producer SDK;
- `render/`: terminal output;  `cli/`: the `cnsched` command;  `dev/`: demo, simulation, benchmarks.
"""
