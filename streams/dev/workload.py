"""The demo's tasks: four showcase tasks submitted through POST /tasks, and a stream of small tasks
on sched.tasks whose lifecycle a simulated runner reports on sched.events (throughput follows the
scores each was placed with under planted "true" alphas, which alpha learning should find)."""

from __future__ import annotations

import asyncio
import json
import time

from schemas.topics import SCHED_EVENTS, SCHED_TASKS
from streams.client import base_url, call
from streams.config import Settings
from streams.dev.sim import TaskRunner, Topology
from streams.kafka import producer
from streams.render.lines import decision_line, energy_decision_line, scaling_line

# the alphas the simulated runner uses (what the learner should find); type defaults differ
TRUE_ALPHA = {"training-data-parallel": 0.35, "fine-tune": 0.6, "batch-analytics": 0.8, "inference": 0.7,
              "preprocessing": 0.5, "data-intensive": 0.25}
WORKLOAD_TYPES = ("fine-tune", "batch-analytics", "data-intensive", "preprocessing", "inference")


DEMO_TASKS = [
    # it reads its data set from the store all along (every epoch), so it says how much the network
    # weighs: left to the one-node rule, a one-off 50 GB load before 4 h of work would weigh almost nothing
    {"id": "train-dp-1", "type": "training-data-parallel", "resources": {"cards": 2, "host_mem_gb": 64},
     "checkpoint_gb": 20, "expected_duration_s": 4 * 3600, "priority": 70, "alpha": 0.2},
    {"id": "infer-1", "type": "inference", "resources": {"cards": 1}, "expected_duration_s": 86400},
    {"id": "prep-1", "type": "preprocessing", "resources": {"host_mem_gb": 32}},
    {"id": "huge-1", "type": "training-model-parallel", "resources": {"cards": 64}},
    {"id": "chat-1", "type": "inference", "resources": {"cards": 1}, "expected_duration_s": 86400,
     "image": {"node": "", "size_gb": 6},
     "scaling": {"min_replicas": 1, "max_replicas": 4, "standby": 1, "target_utilisation": 0.6}},
]
SERVICE_REPLICA_RATE = 100.0  # requests/s one replica of the demo's service serves at full load


def submit_tasks(settings: Settings, topo: Topology, data_node: str, suffix: str = "",
                 expected: dict[str, float] | None = None) -> dict[str, list[str]]:
    """POST the demo's tasks; print each decision; return where each placed one went (by type).
    ``expected``: gets each task's expected duration (what the simulated runner runs it for)."""
    placed: dict[str, list[str]] = {}
    for spec in DEMO_TASKS:
        task = {**spec, "id": spec["id"] + suffix}
        if task["type"] == "training-data-parallel":
            task["data_source"] = {"node": data_node, "size_gb": 50}
        if task["type"] == "inference":
            task["model_repo"] = {"node": topo.nodes[0], "size_gb": 14}
        if "image" in task:
            task["image"] = {"node": topo.nodes[-1], "size_gb": task["image"]["size_gb"]}
        if expected is not None:
            expected[task["id"]] = task.get("expected_duration_s", 3600.0)
        try:
            status, res = call(base_url(settings.web_host, settings.web_port), "POST", "/tasks", task)
        except OSError as exc:
            print(f"decision {task['id']}: POST /tasks failed: {exc}")
            continue
        if status == 422:  # no node of the cluster could ever take it: turned away at once
            why = "; ".join(f"{f['field']}: {f['reason']}" for f in res.get("fields", []))
            print(f"decision {task['id']} rejected: {why}")
            continue
        if status >= 400:
            print(f"decision {task['id']}: POST /tasks failed: HTTP {status}: {res}")
            continue
        print(decision_line(task["id"], res))
        if "scaling" in task:
            continue
        if res.get("status") == "placed":
            placed[task["type"]] = res["nodes"]
    return placed


class Workload:
    """Small tasks sent to sched.tasks through the demo, and a simulated runner that reports their
    lifecycle (started, finished with duration and throughput) on sched.events."""

    def __init__(self, settings: Settings, topo: Topology, runner: TaskRunner, suffix: str = "") -> None:
        self.settings, self.topo, self.runner, self.suffix = settings, topo, runner, suffix
        self.p = producer(settings)
        self.expected: dict[str, float] = {}
        self.submitted = self.started = self.finished = 0
        self.shown_energy = False
        self.checkpointed_at = 0.0
        self.where: dict[str, list[str]] = {}  # task -> the nodes it runs on (decisions, moves)
        self.serving: dict[str, int] = {}  # a scaled service -> its serving replicas (its decisions)
        self.load_at = 0.0

    async def start(self) -> None:
        await self.p.start()

    async def stop(self) -> None:
        await self.p.stop()

    async def submit(self, begin_s: float, end_s: float, every_s: float = 0.5) -> None:
        """One task every ``every_s`` between ``begin_s`` and ``end_s`` into the run; each finishes
        events that are due on the way."""
        t0 = time.monotonic()
        await asyncio.sleep(begin_s)
        k = 0
        while time.monotonic() - t0 < end_s:
            kind = WORKLOAD_TYPES[k % len(WORKLOAD_TYPES)]
            data = self.topo.nodes[(k * 7) % len(self.topo.nodes)]
            task = {"id": f"w{k:04d}{self.suffix}", "type": kind, "resources": {"cards": 1, "host_mem_gb": 8},
                    "data_source": {"node": data, "size_gb": 5}, "expected_duration_s": 300 + 100 * (k % 10),
                    "submitted_at": time.time()}
            if kind == "batch-analytics":  # batch work asks for cheaper, greener power
                task["cost_sensitivity"] = 0.3
            self.expected[task["id"]] = task["expected_duration_s"]
            await self.p.send(self.settings.topic(SCHED_TASKS), json.dumps(task).encode(), key=task["id"].encode())
            self.submitted += 1
            k += 1
            await self.finish_due()
            await self.report_load(time.monotonic() - t0, end_s)
            await asyncio.sleep(every_s)

    async def report_load(self, elapsed: float, end_s: float, every_s: float = 2.0) -> None:
        """Each scaled service's load every ``every_s``: a request rate rising from 40 to 200 req/s
        over the run, and the utilisation it makes of the serving replicas."""
        if time.monotonic() - self.load_at < every_s:
            return
        self.load_at = time.monotonic()
        rate = 40.0 + 160.0 * min(elapsed / end_s, 1.0)
        for service, replicas in self.serving.items():
            util = min(rate / (SERVICE_REPLICA_RATE * max(replicas, 1)), 1.0)
            await self._event({"task_id": service, "event": "load", "at": time.time(), "utilisation": round(util, 3),
                               "request_rate": round(rate, 1), "replicas": replicas})

    async def decided(self, d: dict) -> None:
        if d.get("status") == "scaled":
            if d["task_id"] in self.serving:  # the creation was printed from POST /tasks
                print(scaling_line(d))
            self.serving[d["task_id"]] = d["scaling"]["to_replicas"]
            return
        if d.get("status") == "preempted":  # stop it; it resumes from its checkpoint when placed again
            self.runner.stop(d["task_id"])
            self.where.pop(d["task_id"], None)
            return
        if d.get("cost_sensitivity") and d.get("status") == "placed" and not self.shown_energy:
            self.shown_energy = True
            print(energy_decision_line(d))
        started = self.runner.placed(d, self.expected.get(d["task_id"], 3600.0), time.time())
        if started is not None:
            self.started += 1
            self.where[d["task_id"]] = d["nodes"]
            await self._event(started)

    async def moved(self, ev: dict) -> None:
        """A migration: the runner starts the task again at its new nodes and says so."""
        self.where[ev["task_id"]] = ev["to_nodes"]
        await self._event({"task_id": ev["task_id"], "event": "started", "at": time.time(), "nodes": ev["to_nodes"]})

    async def finish_due(self, checkpoint_every_s: float = 5.0) -> None:
        """Finished events that are due; every ``checkpoint_every_s`` a checkpoint of each running task
        (1 GB, on the simulated store) — what a restart or a move resumes from."""
        now = time.time()
        for e in self.runner.due(now):
            self.finished += 1
            self.where.pop(e["task_id"], None)
            await self._event(e)
        if now - self.checkpointed_at >= checkpoint_every_s:
            self.checkpointed_at = now
            for task_id, nodes in self.where.items():
                await self._event({"task_id": task_id, "event": "checkpoint", "at": now, "nodes": nodes,
                                   "checkpoint_at": now, "checkpoint_gb": 1.0,
                                   "checkpoint_location": f"sim://checkpoints/{task_id}"})

    async def _event(self, e: dict) -> None:
        await self.p.send(self.settings.topic(SCHED_EVENTS), json.dumps(e).encode(), key=e["task_id"].encode())
