"""Process metrics, exposed in the Prometheus text format on GET /metrics (prometheus_client).

``Counters`` is the one handle the code uses: ``inc`` (a counter, name ending in ``_total``), ``set``
(a gauge), ``observe`` (a histogram, buckets from ``HISTOGRAMS``). A metric is created at its first
use, with the label names of that use; every later use must give the same label names (a mismatch, or
a name that clashes with another metric's, is logged once and the value dropped: metrics never stop a
worker). Each ``Counters`` has its own
registry, so two apps in one process (the tests, the bench) never share values.
"""

from __future__ import annotations

import logging
import threading

from prometheus_client import (
    CollectorRegistry,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client import Counter as PromCounter

log = logging.getLogger(__name__)
disable_created_metrics()  # no *_created series: one sample per label set, as operators expect

# name -> (help, buckets)
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "decision_seconds": ("time from a task's arrival at the scheduler to its decision",
                         (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)),
    "window_result_lag_seconds": ("wall-clock time from a window's end to its result being sent",
                                  (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)),
    "ingest_batch_samples": ("samples per probe message taken by the ingest agent",
                             (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)),
    "rescore_seconds": ("time of one rescoring pass over queued and running tasks",
                        (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)),
    "route_lag_seconds": ("time from a change of the network view or inventory to every service's routing "
                          "weights recomputed (and sent when changed)",
                          (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)),
    "route_seconds": ("time to compute one service's routing weights (sched.routes)",
                      (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)),
}


class Counters:
    def __init__(self, prefix: str = "cnsched") -> None:
        self.prefix = prefix
        self.registry = CollectorRegistry(auto_describe=False)
        self._metrics: dict[str, tuple[object, tuple[str, ...]]] = {}
        self._help: dict[str, str] = {}
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    def describe(self, name: str, help_text: str) -> None:
        self._help[name] = help_text

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        m = self._metric(PromCounter, name, labels)
        if m is not None:
            m.inc(amount)

    def set(self, name: str, value: float, **labels: str) -> None:
        """A gauge: the last value wins."""
        m = self._metric(Gauge, name, labels)
        if m is not None:
            m.set(value)

    def replace(self, name: str, label_names: tuple[str, ...], rows: list[tuple[tuple, float]]) -> None:
        """A gauge's whole set of series at once (``rows``: (label values in ``label_names`` order, value)):
        series not in ``rows`` are gone (a node removed from the inventory stops being reported)."""
        with self._lock:
            entry = self._metrics.get(name)
            if entry is None:
                entry = self._metrics[name] = (self._create(Gauge, name, tuple(label_names)), tuple(label_names))
        metric, known = entry
        if known != tuple(label_names) or not isinstance(metric, Gauge):
            if name not in self._warned:
                self._warned.add(name)
                log.warning("metric %s (labels %s) not recorded: created with labels %s", name, label_names, known)
            return
        metric.clear()
        for values, value in rows:
            metric.labels(*[str(v) for v in values]).set(value)

    def observe(self, name: str, value: float, **labels: str) -> None:
        """One observation of a histogram (``HISTOGRAMS`` gives its buckets)."""
        m = self._metric(Histogram, name, labels)
        if m is not None:
            m.observe(value)

    def get(self, name: str, **labels: str) -> float:
        """A counter's or gauge's value (0 if never set)."""
        full = f"{self.prefix}_{name}"
        value = self.registry.get_sample_value(full, {k: str(v) for k, v in labels.items()})
        return 0.0 if value is None else value

    def exposition(self) -> str:
        return generate_latest(self.registry).decode()

    def _metric(self, kind, name: str, labels: dict):
        names = tuple(sorted(labels))
        with self._lock:
            entry = self._metrics.get(name)
            if entry is None:
                try:
                    entry = (self._create(kind, name, names), names)
                except ValueError as exc:  # a clash, e.g. gauge x beside counter x_total: both are "x"
                    entry = (exc, names)
                self._metrics[name] = entry
        metric, known = entry
        if known != names or not isinstance(metric, kind):
            if name not in self._warned:
                self._warned.add(name)
                why = metric if isinstance(metric, Exception) else f"created with labels {known}"
                log.warning("metric %s (labels %s) not recorded: %s", name, names, why)
            return None
        return metric.labels(**{k: str(v) for k, v in labels.items()}) if names else metric

    def _create(self, kind, name: str, names: tuple[str, ...]):
        full = f"{self.prefix}_{name}"
        if kind is Histogram:
            help_text, buckets = HISTOGRAMS.get(name, (name, Histogram.DEFAULT_BUCKETS))
            return Histogram(full, self._help.get(name, help_text), names, registry=self.registry, buckets=buckets)
        return kind(full, self._help.get(name, name), names, registry=self.registry)
