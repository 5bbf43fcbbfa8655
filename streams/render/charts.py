"""Charts as PNG files, drawn with matplotlib (the ``plot`` extra: ``pip install 'cnsched[plot]'``).

Imported only by the commands that draw (``--plot``, ``--png``), so the worker and every other
command never load it. Each function writes one file; an unwritable path raises OSError, and a
missing matplotlib raises PlotUnavailable with the line to install it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


@dataclass(frozen=True)
class Band:
    label: str
    low: np.ndarray
    high: np.ndarray


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("drawing needs matplotlib: pip install 'cnsched[plot]'") from None
    return plt


def line_chart(path, series: list[tuple[str, np.ndarray]], *, title: str, xlabel: str, ylabel: str,
               x: np.ndarray | None = None, band: Band | None = None, log_y: bool = False) -> None:
    """Lines over a shared x (default: the sample index), with an optional shaded band; NaN are gaps."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=100)
    try:
        n = max((len(v) for _, v in series), default=0)
        xs = np.arange(n) if x is None else np.asarray(x, dtype=float)
        if band is not None:
            ax.fill_between(xs[:len(band.low)], band.low, band.high, alpha=0.25, color="tab:red", linewidth=0,
                            label=band.label)
        for label, values in series:
            ax.plot(xs[:len(values)], np.asarray(values, dtype=float), label=label, linewidth=1.2)
        if log_y:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
