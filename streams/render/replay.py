"""The replay's JCT distributions per policy as a PNG: log10 of the completion time at every
percentile (1..99) of the finished jobs of one class, one line per policy."""

from __future__ import annotations

import numpy as np

COLOURS = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189))


def jct_png(jct_by_policy: dict[str, np.ndarray], path) -> None:
    from streams.render.png import line_chart

    pct = np.arange(1, 100)
    series = [(name, np.log10(np.maximum(np.percentile(v, pct), 1.0)), COLOURS[k % len(COLOURS)])
              for k, (name, v) in enumerate(jct_by_policy.items()) if np.size(v)]
    if not series:
        return
    with open(path, "wb") as f:
        f.write(line_chart(series, unit="log10 s"))
