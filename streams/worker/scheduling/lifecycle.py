"""What happens to a placed task after its decision, as its runner and the node views report it: it
starts (a move settles), is refused or never starts (the next candidate; a move rolls back), saves a
checkpoint, fails (re-queued from its checkpoint), or its node fails with no room elsewhere
(re-queued and decided again); the incidents of failed nodes say what became of their tasks. A mixin
of the Scheduler, as the queue is."""

from __future__ import annotations

import math
import time

from schemas.operations import Incident
from schemas.sched import Decision, Fallback, RescheduleEvent, ScoreBreakdown
from streams.worker.scheduling.held import Pending
from streams.worker.scheduling.preemption import preempt
from streams.worker.scheduling.speeds import speeds_for


def known(v: float) -> float | None:
    return v if math.isfinite(v) else None


class LifecycleMixin:
    def finished(self, task_id: str, now: float, throughput: float | None = None) -> bool:
        """The task finished: the rate its runner reports (``throughput``) joins its workload's record
        (speeds.py), then its run joins its submitter's history (durations.py), then it ends."""
        run = self.running.get(task_id)
        if run is not None and (self.durations is not None or self.speeds is not None):
            nodes = self.nodes(now)
            rows = [nodes.index[n] for n in run.nodes if n in nodes.index]
            if self.speeds is not None and rows and len(nodes.card_models) == len(nodes.ids):
                self.speeds.measured(run.task.workload, nodes.card_models[rows].tolist(), throughput)
            if self.durations is not None:
                speed = float(speeds_for(self, run.task, nodes)[rows].min()) if rows else 1.0
                self.durations.finished(run.task, run.ran_for(now), speed)
        return self.end(task_id)

    def start(self, task_id: str, nodes: list[str], restore_s: float | None = None) -> None:
        """The runner started the task (where it was placed or moved to); ``restore_s``: how long
        resuming from its checkpoint took there (what a move's cost counts)."""
        run = self.running.get(task_id)
        if run is not None and (not nodes or sorted(nodes) == sorted(run.nodes)):
            run.started = True
            if restore_s is not None and (run.moves or math.isfinite(run.checkpoint_at)):
                run.restore_s = restore_s
            run.rollback = None
            self.ledger.settle(task_id, run.nodes, run.placed_at)  # a move is done: the source is free
            self.books_changed()

    def roll_back(self, task_id: str, now: float) -> RescheduleEvent | None:
        """A move whose start never came, or failed at the target: the task stays where it was (the
        target's holds released)."""
        run = self.running.get(task_id)
        if run is None or run.rollback is None:
            return None
        nodes, p95, loss, end, _ = run.rollback
        target = run.nodes
        self.ledger.release(task_id, [n for n in target if n not in nodes])
        self.ledger.settle(task_id, nodes, now)
        run.nodes, run.baseline_p95, run.baseline_loss, run.seen_window_end = nodes, p95, loss, end
        run.rollback, run.started = None, True
        self.books_changed()
        zero = ScoreBreakdown(compute_score=0.0, network_score=0.0, composite=0.0)
        return RescheduleEvent(task_id=task_id, from_nodes=target, to_nodes=nodes, trigger="rollback",
                               expected_gain_s=0.0, migration_cost_s=0.0, before=zero, after=zero,
                               state_version=self.version, at=now)

    def refuse(self, task_id: str, reason: str, now: float, max_fallbacks: int) -> Decision | None:
        """The node(s) refused the task or it failed to start there: the next candidate is tried,
        the refusing nodes left out (up to ``max_fallbacks`` tries, then it waits in the queue).
        None when the task is not waiting to start."""
        run = self.running.get(task_id)
        if run is None or run.started or run.rollback is not None:
            return None  # running, or a move to roll back instead (roll_back)
        tried = run.refused + [n for n in run.nodes if n not in run.refused]
        self.end(task_id)
        self.pending[task_id] = Pending(run.task, run.task.submitted_at or now, run.restarts, known(run.checkpoint_at),
                                        queued_at=now, alpha=run.alpha)
        fallbacks = [Fallback(node=n, reason=reason) for n in run.nodes]
        if len(tried) > max_fallbacks:  # enough tried: it waits in the queue, retried as the state changes
            d = self.decide(run.task, now, exclude=list(self.nodes(now).ids))
            return d.model_copy(update={
                "candidates": [], "rejected": {n: "refused" for n in tried}, "rejected_counts": {"refused": len(tried)},
                "fallbacks": fallbacks + [Fallback(node="", reason=f"{len(tried)} nodes tried: queued")]})
        d = self.decide(run.task, now, exclude=tried)
        if task_id in self.running:
            self.running[task_id].refused = tried
        return d.model_copy(update={"fallbacks": fallbacks + list(d.fallbacks)})

    def expire_starts(self, now: float, timeout_s: float, max_fallbacks: int) -> list[Decision | RescheduleEvent]:
        """Tasks placed or moved more than ``timeout_s`` ago that no runner reported started: a move
        is rolled back; a placement goes to the next candidate as if refused (reason start_timeout)."""
        if timeout_s <= 0:
            return []
        late = [t for t, r in self.running.items() if not r.started and now - max(r.placed_at, r.start_at) > timeout_s]
        out: list[Decision | RescheduleEvent] = []
        for t in late:
            if self.running[t].rollback is not None:
                out.append(self.roll_back(t, now))
            elif (d := self.refuse(t, "start_timeout", now, max_fallbacks)) is not None:
                out.append(d)
        return out

    def checkpoint(self, task_id: str, at: float, gb: float | None = None, save_s: float | None = None) -> None:
        """The running task saved its state: a restart or a move resumes from here (``save_s``: how
        long the save took, what a move's cost counts). It changes what a move costs and whether a
        drained node's task may leave now: the state's version moves, so the next rescore looks again
        (else a drain waited for some other change: a quiet cluster never moved the task)."""
        run = self.running.get(task_id)
        if run is not None and at >= (run.checkpoint_at if math.isfinite(run.checkpoint_at) else -math.inf):
            run.checkpoint_at = at
            if gb is not None:
                run.checkpoint_gb = gb
            if save_s is not None:
                run.save_s = save_s
            self.touch()

    def progress(self, task_id: str, done: int | None, total: int | None) -> None:
        """Its runner says ``done`` of ``total`` steps are done: a move reads its remaining work from
        that share (Running.left_s) instead of from the time it ran (None: nothing said)."""
        run = self.running.get(task_id)
        if run is not None and done is not None and total:
            run.done_share = min(max(done / total, 0.0), 1.0)
            self.touch()

    def stale(self, task_id: str, event: str, nodes: list[str]) -> bool:
        """A runner's failed, refused or started report that names nodes other than the task's placement
        now (or the task is queued: placed nowhere) — a redelivery after the runner crashed, or news of a
        placement it has left. Applied, it would end or move the placement it has now; reports naming no
        nodes are applied as they come."""
        if event not in ("failed", "refused", "started") or not nodes:
            return False
        run = self.running.get(task_id)
        return run is None or set(nodes) != set(run.nodes)

    def fail(self, task_id: str, at: float, max_restarts: int) -> float | None:
        """The task failed where it ran: re-queued to resume from its last checkpoint (the work since
        then is lost, returned in seconds), or ended for good (None) after ``max_restarts``."""
        run = self.running.get(task_id)
        if run is None or run.restarts >= max_restarts:
            self.end(task_id)
            return None
        self.end(task_id)
        self.pending[task_id] = Pending(run.task, run.task.submitted_at or at, run.restarts + 1,
                                        known(run.checkpoint_at), queued_at=at, alpha=run.alpha)
        self.touch()
        return run.work_lost(at)

    def watch(self, now: float | None = None) -> list[Incident]:
        """Incidents opened, located or recovered since the last look (call after reschedule and
        recover)."""
        now = time.time() if now is None else now
        nodes = self.nodes(now)
        failed, cause, withheld, dark = self.judged(nodes, now)
        return self.incidents.update(nodes, failed, cause, self.running, now, self.outcome, withheld, dark)

    def outcome(self, task_id: str) -> str:
        """What became of a task whose node failed (an incident's recovery says it)."""
        run = self.running.get(task_id)
        if run is not None:
            victims = self.made_room.get(task_id)
            where = ",".join(run.nodes)
            return f"placed on {where} (preempting {','.join(victims)})" if victims else f"moved to {where}"
        return "queued" if task_id in self.pending else "ended"

    def recover(self, now: float | None = None) -> list[Decision]:
        """Tasks still held on a failed or vanished node once moves were tried (no node could take
        them, call after reschedule): released from it, re-queued to resume from their last checkpoint,
        and decided again at once — placed, placed by preempting work they outrank (the usual rules),
        or queued with the reasons. Each decision's first fallback says what happened."""
        now = time.time() if now is None else now
        nodes = self.nodes(now)

        def dead(n: str) -> bool:  # failed or gone, or draining past its deadline (its work had to go)
            i = nodes.index.get(n)
            return i is None or not nodes.available[i] or bool(nodes.draining[i] and now >= nodes.drain_due[i])

        def failed(n: str) -> bool:
            return n not in nodes.index or not nodes.available[nodes.index[n]]

        stranded = [r for r in self.running.values() if any(dead(n) for n in r.nodes)]
        for r in [r for r in stranded if not any(failed(n) for n in r.nodes)]:
            # past its drain's deadline with nowhere to move: stopped on the node that drains (a
            # preempted decision tells its runner), queued to resume from its checkpoint
            preempt(self, r.task.id, "drain", "drain", now)
        stranded = [r for r in stranded if any(failed(n) for n in r.nodes)]
        if not stranded:
            return []
        notes = {}
        for r in stranded:
            lost = r.work_lost(now)
            self.end(r.task.id)
            resume = known(r.checkpoint_at)
            self.pending[r.task.id] = Pending(r.task, r.task.submitted_at or now, r.restarts, resume, queued_at=now,
                                              alpha=r.alpha)
            notes[r.task.id] = Fallback(node=",".join(n for n in r.nodes if dead(n)), reason=(
                f"node_failed: released and re-queued from {'its checkpoint' if resume is not None else 'the start'}"
                + (f" ({lost:.0f} s of work lost)" if r.started else " (it had not started: no work lost)")))
        out = self.decide_many([r.task for r in stranded], now)
        return [d.model_copy(update={"fallbacks": [notes[d.task_id], *d.fallbacks]}) for d in out]
