"""Data that follows compute (issue 53, E2; 数随算走): copies of named data staged at the sites' stores,
remembered and reused.

- A site's store is the endpoint ``CopyBook.store`` names with the site (``store.{site}`` by default,
  CNSCHED_STAGING_STORE; empty: no staging), measured by the probes like any endpoint.
- A task whose biggest load names what it loads (``Endpoint.name``) is costed from its origin and from
  every store holding a copy or copying one (ready when the copy is expected to end): at each node the
  least of the copy's wait plus the load over the path measured from there (seconds.Costing._load).
- Placed at a site whose store holds no copy (and is not the origin): the decision stages one, from the
  source the load was costed from to that store, booked on the path; the task loads as the copy
  arrives (costed as from the source), later tasks from the store.
- A gang that waits for a set of nodes at one site has its data staged there ahead (the decision that
  says it waits carries the staging): its load is local when it starts.
- Each store keeps at most ``capacity_gb`` of copies, the least recently used out first (one being
  copied or read by a running task's load is kept only by being used recently: the book does not pin).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.sched import DataAt, Staging, Task
from streams.adapters.tasks import biggest

STORE = "store.{site}"  # a site's store endpoint by default (CNSCHED_STAGING_STORE)


@dataclass
class Copy:
    size_gb: float
    ready_at: float  # when the copy is expected to be complete (epoch s)
    used_at: float  # last staged or chosen as a source
    done: bool = False  # a runner said the copy ended (``arrived``)


@dataclass
class CopyBook:
    store: str = STORE  # a site's store endpoint ("" : staging off)
    capacity_gb: float = 1_000_000.0  # per store
    at: dict[str, dict[str, Copy]] = field(default_factory=dict)  # store endpoint -> {name: copy}
    on_stage: Callable[[str, Staging, float], None] | None = None  # told (task, staging, at) of every copy made
    _new: dict[str, list[Staging]] = field(default_factory=dict)  # task -> staging its next decision carries
    _ahead: dict[str, list[Staging]] = field(default_factory=dict)  # task -> staged while it waited (take)
    _reads: dict[str, DataAt] = field(default_factory=dict)  # task -> the copy its placement reads (take)

    @property
    def on(self) -> bool:
        return bool(self.store)

    def store_of(self, site: str) -> str | None:
        """The store endpoint of ``site`` (None: staging off, or no site)."""
        return self.store.format(site=site) if self.store and site else None

    def holding(self, name: str | None) -> list[tuple[str, float]]:
        """[(store, ready_at)] of the copies of ``name``, by store name."""
        if not name:
            return []
        return sorted((ep, c[name].ready_at) for ep, c in self.at.items() if name in c)

    def has(self, name: str, store: str) -> bool:
        return name in self.at.get(store, {})

    def used(self, name: str, store: str, now: float) -> None:
        c = self.at.get(store, {}).get(name)
        if c is not None:
            c.used_at = now

    def stage(self, task: str, name: str, source: str, target: str, size_gb: float, expected_s: float,
              now: float) -> Staging:
        """Record a copy of ``name`` from ``source`` to ``target`` starting ``now`` and expected to take
        ``expected_s``; the task's next decision carries it. Older copies at ``target`` go, least
        recently used first, while the store holds more than its capacity (never the new one)."""
        s = Staging(name=name, source=source, target=target, size_gb=round(float(size_gb), 6),
                    expected_s=round(float(expected_s), 3))
        copies = self.at.setdefault(target, {})
        copies[name] = Copy(float(size_gb), now + float(expected_s), now)
        over = sum(c.size_gb for c in copies.values()) - self.capacity_gb
        for old in sorted((k for k in copies if k != name), key=lambda k: copies[k].used_at):
            if over <= 0:
                break
            over -= copies.pop(old).size_gb
        if self.on_stage is not None:
            self.on_stage(task, s, now)
        self._new.setdefault(task, []).append(s)
        return s

    def reads(self, task: str, name: str, store: str) -> None:
        """The task's placement reads the copy of ``name`` at ``store``: its decision says so (take)."""
        self._reads[task] = DataAt(name=name, store=store)

    def arrived(self, staged, at: float) -> None:
        """A runner says copies ended (``staged``: [{"name", "target"}] of a ``staged`` event; None or
        anything else: nothing): they are ready from ``at`` (what later loads are costed from)."""
        for s in staged if isinstance(staged, list) else ():
            c = self.at.get(s.get("target"), {}).get(s.get("name")) if isinstance(s, dict) else None
            if c is not None:
                c.ready_at, c.done = min(c.ready_at, at), True

    def restore(self, records) -> int:
        """A restarted worker's copies, from the task records: each decision's staging a copy expected
        at its end, a ``staged`` event's copies ready from then; each store kept within its capacity.
        Returns the copies restored (a record keeps its last 50 entries: older copies are forgotten,
        and staged again when next wanted)."""
        n = 0
        for rec in records:
            for h in rec.history or ():
                d, ev = h.get("decision"), h.get("event")
                for s in (d or {}).get("staging") or ():
                    at = float(d.get("decided_at") or 0.0)
                    self.at.setdefault(s["target"], {})[s["name"]] = Copy(float(s["size_gb"]),
                                                                          at + float(s["expected_s"]), at)
                    n += 1
                if isinstance(ev, dict) and ev.get("event") == "staged":
                    self.arrived(ev.get("staged"), float(ev.get("at") or 0.0))
        for copies in self.at.values():
            over = sum(c.size_gb for c in copies.values()) - self.capacity_gb
            for old in sorted(copies, key=lambda k: copies[k].used_at):
                if over <= 0:
                    break
                over -= copies.pop(old).size_gb
        return n

    def take(self, task: str, placed_at: str | None | bool = None) -> dict:
        """{"staging": [...]} for the task's decision when it staged something since its last, and
        {"data_at": ...} for a placement that reads a copy at a store (reads), else {}.
        ``placed_at``: the store of the site the decision places the task at (None or False: not placed). A
        placement also carries again what was staged for it there while it waited and no runner has
        said is done: a runner copies only what a placement carries (the Slurm bridge runs the staging
        before the task's job and points the job at the copy), so a copy staged ahead is made then at
        the latest, never assumed made."""
        got = self._new.pop(task, None) or []
        read = self._reads.pop(task, None)
        if not placed_at:
            if got:
                self._ahead.setdefault(task, []).extend(got)
            return {"staging": got} if got else {}
        have = {(s.name, s.target) for s in got}
        for s in self._ahead.pop(task, ()):
            copy = self.at.get(s.target, {}).get(s.name)
            if s.target == placed_at and copy is not None and not copy.done and (s.name, s.target) not in have:
                got.append(s)
                have.add((s.name, s.target))
        return ({"staging": got} if got else {}) | ({"data_at": read} if read is not None else {})


def load_name(task: Task) -> str | None:
    """The name of what a task loads over its biggest endpoint (what a copy is staged of), or None."""
    big = biggest(task)
    return big.name if big is not None and big.size_gb > 0 else None


def site_of(nodes, members) -> str | None:
    """The one site all ``members`` (node rows of a NodeView) are at, or None."""
    sites = {str(nodes.sites[m]) if len(nodes.sites) else "" for m in members}
    return sites.pop() if len(sites) == 1 and "" not in sites else None
