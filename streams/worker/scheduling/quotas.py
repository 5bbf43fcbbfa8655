"""The quota set as the scheduler's arrays: per team, guaranteed and maximum cards per accelerator class
of the inventory and of any class (core/quota.py), and what the running tasks hold of them."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from core.quota import dominant_shares, usage, within_maximum
from schemas.quota import ANY_CLASS, DEFAULT_TEAM, QuotaSet
from schemas.sched import Task


@dataclass
class QuotaUse:
    """The running tasks' shares: per task its team (-1: none), class, cards and placement time; and
    per team and class what they hold (float[T, C + 1])."""

    team: np.ndarray
    cls: np.ndarray
    cards: np.ndarray
    placed_at: np.ndarray
    use: np.ndarray


class QuotaBook:
    """The quota set in force. In a worker it is read from the quota table (``loader``) again after
    every recovery (``invalidate``); tests and the replay set it directly (``replace``)."""

    def __init__(self, quotas: QuotaSet | None = None) -> None:
        self._set = quotas or QuotaSet()
        self.version = 0
        self._arrays: tuple | None = None
        self.loader = None  # () -> QuotaSet | None
        self._stale = False
        self.books_key = None  # () -> a key that changes whenever the running tasks or the inventory do
        self._use: tuple | None = None

    def replace(self, quotas: QuotaSet) -> None:
        self._set, self._arrays, self._stale = quotas, None, False
        self.version += 1

    def invalidate(self) -> None:
        self._stale = self.loader is not None

    @property
    def set(self) -> QuotaSet:
        if self._stale:
            self.replace((self.loader() if self.loader else None) or QuotaSet())
        return self._set

    @property
    def active(self) -> bool:
        return bool(self.set.quotas)

    @property
    def teams(self) -> list[str]:
        return self.set.teams()

    def team_of(self, task: Task) -> int | None:
        """The task's team index; -1 without quotas (no limits); None for a team no quota names."""
        if not self.active:
            return -1
        name = task.team or DEFAULT_TEAM
        teams = self.teams
        i = int(np.searchsorted(teams, name))
        return i if i < len(teams) and teams[i] == name else None

    def beyond_maximum(self, task: Task) -> str | None:
        """Why ``task`` could never run within its team's quota (it needs more cards, all workers
        together, than the team may ever hold of any class), or None."""
        team = self.team_of(task)
        if team is None or team < 0:
            return None
        cards = task.resources.cards * task.peers
        caps = [q.max_cards for q in self.set.quotas if q.team == self.teams[team] and q.accel_class == ANY_CLASS
                and q.max_cards is not None]
        if caps and cards > min(caps):
            return f"it needs {cards} cards; team {self.teams[team]} may hold at most {min(caps):g}"
        return None

    def arrays(self, class_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(guaranteed, maximum) float[T, C + 1] over the inventory's classes and any class. The any-
        class guarantee is at least the team's class guarantees added up; a class without an entry of
        its own is bounded only by the any-class entry (its columns repeat it)."""
        key = (self.version, tuple(class_names))
        if self._arrays is not None and self._arrays[0] == key:
            return self._arrays[1]
        teams = self.teams
        ti = {t: i for i, t in enumerate(teams)}
        ci = {c: i for i, c in enumerate(class_names)}
        g = np.zeros((len(teams), len(class_names) + 1))
        m = np.full((len(teams), len(class_names) + 1), np.inf)
        own = np.zeros(g.shape, bool)  # the team has an entry for the class
        for q in self.set.quotas:
            c = -1 if q.accel_class == ANY_CLASS else ci.get(q.accel_class)
            if c is None:
                continue  # a class no node has (yet)
            g[ti[q.team], c] = q.guaranteed_cards
            m[ti[q.team], c] = np.inf if q.max_cards is None else q.max_cards
            own[ti[q.team], c] = True
        g[:, -1] = np.maximum(g[:, -1], np.where(own[:, :-1], g[:, :-1], 0.0).sum(axis=1))
        g[:, :-1] = np.where(own[:, :-1], g[:, :-1], g[:, -1:])
        m[:, :-1] = np.where(own[:, :-1], m[:, :-1], m[:, -1:])
        self._arrays = (key, (g, m))
        return g, m

    def use(self, running: Collection, node_index: dict[str, int], node_class: np.ndarray, n_classes: int) -> QuotaUse:
        """What the running tasks (streams.worker.scheduling.held.Running) hold, by team and class
        (a task's class: its first node's). Computed once per ``books_key`` (the scheduler's
        allocations), not once per task decided."""
        key = None if self.books_key is None else (self.books_key(), self.version, len(running), n_classes)
        if key is not None and self._use is not None and self._use[0] == key:
            return self._use[1]
        team = np.array([self._team_or_none(r.task) for r in running], np.int64)
        cls = np.array([node_class[node_index[r.nodes[0]]] if r.nodes and r.nodes[0] in node_index else 0
                        for r in running], np.int64)
        cards = np.array([r.task.resources.cards * len(r.nodes) for r in running], np.float64)
        placed = np.array([r.placed_at for r in running], np.float64)
        out = QuotaUse(team, cls, cards, placed, usage(team, cls, cards, len(self.teams), n_classes))
        self._use = (key, out)
        return out

    def why_no_room(self, task: Task, team: int | None) -> str:
        """Why a task's team may take no node now: it has no quota at all (a quota set that names other
        teams only), or its maximum is reached."""
        name = task.team or DEFAULT_TEAM
        if team is None:
            return (f"team {name} has no quota: the quota set names {', '.join(self.teams)} "
                    f"(add {name} to it, or submit under one of them)")
        return f"team {name} would exceed its maximum cards"

    def room(self, running: Collection, task: Task, team: int | None, nodes) -> np.ndarray:
        """bool[N]: nodes whose class ``task``'s team may take its cards of (core.quota.within_maximum);
        none for a team no quota names (the scheduler turns such a task away first)."""
        if team is None:
            return np.zeros(len(nodes.ids), bool)
        if team < 0:
            return np.ones(len(nodes.ids), bool)
        g, maximum = self.arrays(nodes.class_names)
        use = self.use(running, nodes.index, nodes.node_class, len(nodes.class_names)).use
        cards = task.resources.cards * task.peers
        ok = within_maximum(team, cards, nodes.node_class, use, maximum)
        if task.deferrable_until is None and not self.may_borrow_tidal(team, cards, g, use, nodes):
            ok[:] = False
        return ok

    def tidal(self) -> np.ndarray:
        """bool[T]: the teams whose idle guaranteed cards only deferrable tasks may borrow."""
        tidal = {q.team for q in self.set.quotas if q.tidal}
        return np.array([t in tidal for t in self.teams], bool)

    def may_borrow_tidal(self, team: int, cards: float, g: np.ndarray, use: np.ndarray, nodes) -> bool:
        """Whether a task that cannot be deferred may take ``cards``: what it borrows beyond its team's
        guarantee must leave the tidal teams' idle guaranteed cards free."""
        tidal = self.tidal()
        beyond = cards - max(g[team, -1] - use[team, -1], 0.0)
        if beyond <= 0 or not tidal.any():
            return True
        others = tidal & (np.arange(tidal.size) != team)
        lent = np.maximum(g[others, -1] - use[others, -1], 0.0).sum()
        free = float(nodes.usable[nodes.available, 0].sum())
        return free - cards >= lent

    def headroom(self, running: list, nodes) -> np.ndarray:
        """float[T]: each team's cards guaranteed of any class less those it holds."""
        g, _ = self.arrays(nodes.class_names)
        return g[:, -1] - self.use(running, nodes.index, nodes.node_class, len(nodes.class_names)).use[:, -1]

    def shares(self, tasks: list[Task], running: list, nodes) -> np.ndarray:
        """float[len(tasks)]: the dominant share each task's team holds now (0 without quotas)."""
        if not self.active:
            return np.zeros(len(tasks))
        k = len(nodes.class_names)
        use = self.use(running, nodes.index, nodes.node_class, k).use
        capacity = np.bincount(nodes.node_class, weights=nodes.capacity[:, 0], minlength=k) if k else np.zeros(0)
        shares = dominant_shares(use, capacity)
        return np.array([shares[t] if t is not None and t >= 0 else 0.0 for t in map(self.team_of, tasks)])

    def _team_or_none(self, task: Task) -> int:
        t = self.team_of(task)
        return -1 if t is None else t

    def over_cluster(self, quotas: QuotaSet, cards_by_class: dict[str, int]) -> list[tuple[str, str]]:
        """(field, reason) for each class whose guarantees add up to more cards than the inventory
        has of it (``*``: of all classes)."""
        total = sum(cards_by_class.values())
        sums: dict[str, int] = {}
        first: dict[str, int] = {}
        for i, q in enumerate(quotas.quotas):
            sums[q.accel_class] = sums.get(q.accel_class, 0) + q.guaranteed_cards
            first.setdefault(q.accel_class, i)
        out = []
        for cls, g in sorted(sums.items()):
            have = total if cls == ANY_CLASS else cards_by_class.get(cls, 0)
            if g > have:
                out.append((f"quotas.{first[cls]}.guaranteed_cards",
                            f"class {cls}: {g} cards guaranteed in all, the cluster has {have}"))
        return out
