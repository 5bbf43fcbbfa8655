"""Stored history for tests: window results with a daily rhythm."""

import numpy as np

DAY = 86_400.0
T0 = 1_764_374_400.0  # 2025-11-29 00:00 UTC


def windows(src, dst, days, level=1.0, amp=0.5, step=60.0, start=T0 + 7200):
    """rtt_ms with a daily rhythm (peak at 18:00 UTC), one window per step."""
    t = np.arange(start, start + days * DAY, step)
    v = level + amp * np.sin(2 * np.pi * ((t % DAY) / DAY - 0.5))
    return [{"src": src, "dst": dst, "metric": "rtt_ms", "window_start": float(a), "window_end": float(a + step),
             "count": 10, "kept": 10, "outliers": 0, "lost": 0, "mean": float(x), "p50": float(x),
             "p95": float(x) * 1.5, "p99": float(x) * 2, "min": float(x), "max": float(x)} for a, x in zip(t, v, strict=True)]
