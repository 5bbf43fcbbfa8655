"""The replay's JCT distributions per policy as a PNG (matplotlib): the completion time at every
percentile (1..99) of the finished jobs of one class, one line per policy, on a log scale."""

from __future__ import annotations

import numpy as np


def jct_png(jct_by_policy: dict[str, np.ndarray], path, job_class: str = "sensitive") -> None:
    from streams.render.charts import line_chart

    pct = np.arange(1, 100)
    series = [(name, np.maximum(np.percentile(v, pct), 1.0)) for name, v in jct_by_policy.items() if np.size(v)]
    if not series:
        return
    line_chart(path, series, title=f"job completion time by policy ({job_class} jobs)", xlabel="percentile of jobs",
               ylabel="JCT (s)", x=pct, log_y=True)
