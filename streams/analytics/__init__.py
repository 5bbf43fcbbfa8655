"""Services over core and the stored history (sinks.queries): forecasts, learned alphas, power sizing, backtests."""
