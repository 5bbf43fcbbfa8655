"""Process counters, exposed in the Prometheus text format on GET /metrics."""

from __future__ import annotations

from collections import Counter


class Counters:
    def __init__(self, prefix: str = "cnsched") -> None:
        self.prefix = prefix
        self._values: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
        self._help: dict[str, str] = {}
        self._gauges: set[str] = set()

    def describe(self, name: str, help_text: str) -> None:
        self._help[name] = help_text

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        self._values[(name, tuple(sorted(labels.items())))] += amount

    def set(self, name: str, value: float, **labels: str) -> None:
        """A gauge: the last value wins."""
        self._values[(name, tuple(sorted(labels.items())))] = value
        self._gauges.add(name)

    def get(self, name: str, **labels: str) -> float:
        return self._values[(name, tuple(sorted(labels.items())))]

    def exposition(self) -> str:
        lines: list[str] = []
        names = sorted({n for n, _ in self._values} | set(self._help))
        for name in names:
            full = f"{self.prefix}_{name}"
            lines.append(f"# HELP {full} {self._help.get(name, name)}")
            lines.append(f"# TYPE {full} {'gauge' if name in self._gauges else 'counter'}")
            for (n, labels), v in sorted(self._values.items()):
                if n != name:
                    continue
                lab = ",".join(f'{k}="{val}"' for k, val in labels)
                num = repr(float(v)) if name in self._gauges else f"{v:g}"
                lines.append(f"{full}{{{lab}}} {num}" if lab else f"{full} {num}")
        return "\n".join(lines) + "\n"
