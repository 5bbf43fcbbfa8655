"""Issue 55, one bridge per site: two real Slurm clusters side by side on this machine (``east``: a1, a2;
``west``: b1, b2; each its own slurmctld, ports and SLURM_CONF), one bridge each, one cnsched. Every
task runs in the cluster of the nodes cnsched chose, exactly once, across a restart of a bridge; a gang
stays in one cluster; a decision spread over both is refused by the bridge of its first node; a move
between clusters is cancelled by one bridge and submitted by the other."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from streams.bridge.slurm_jobs import SlurmRunner
from streams.kafka import ensure_topics
from streams.runtime.processes import start_worker, stop_process
from streams.runtime.slurm_cluster import SlurmCluster, missing
from tests.helpers.http import call

pytestmark = [pytest.mark.integration, pytest.mark.skipif(missing() is not None, reason=str(missing()))]


@pytest.fixture
def sites(tmp_path):
    east = SlurmCluster(tmp_path / "east", nodes=("a1", "a2"), name="east")
    west = SlurmCluster(tmp_path / "west", nodes=("b1", "b2"), name="west")
    try:
        east.start()
        west.start()
        yield {"east": east, "west": west}
    finally:
        east.stop(), west.stop()  # each cancels its jobs before its daemons stop


def jobs_by_name(cluster: SlurmCluster) -> Counter:
    """How many jobs of each name the cluster has (running, pending or ended within MinJobAge)."""
    out = cluster.run("scontrol", "show", "job", "-o", check=False)
    return Counter(f.split("=", 1)[1] for line in out.splitlines() for f in line.split() if f.startswith("JobName="))


def placed_on(cluster: SlurmCluster) -> dict[str, str]:
    """Job name -> its nodes, of the cluster's pending and running jobs."""
    return dict(line.split() for line in cluster.run("squeue", "-h", "-o", "%j %N").splitlines() if len(line.split()) == 2)


def test_each_bridge_submits_its_own_clusters_decisions(sites, tmp_path):
    east, west = sites["east"], sites["west"]
    now = time.time()
    a = SlurmRunner("card", tmp_path / "ra", east.env, cluster="east")
    b = SlurmRunner("card", tmp_path / "rb", west.env, cluster="west")
    a.load(), b.load()
    assert (a.own, b.own) == ({"a1", "a2"}, {"b1", "b2"})
    d = {"task_id": "t1", "status": "placed", "nodes": ["a1"], "cards": 2, "command": "sleep 60",
         "decided_at": now, "time_limit_s": 600}
    assert a.on_decision(d, now) == [] and b.on_decision(d, now) == []
    assert "t1" in a.jobs and "t1" not in b.jobs and b.foreign["t1"].command == "sleep 60"
    # spread over both clusters: the bridge of its first node refuses it, naming every node; nothing runs
    mixed = {**d, "task_id": "t2", "nodes": ["b1", "a2"], "cards": 8}
    assert a.on_decision(mixed, now) == []
    (ev,) = b.on_decision(mixed, now)
    assert ev["event"] == "refused" and ev["nodes"] == ["b1", "a2"] and "a2 not in west" in ev["reason"]
    assert jobs_by_name(east) == {"t1": 1} and jobs_by_name(west) == {}
    # a start_at (a site's power ramp) is Slurm's --begin: the job waits for it
    assert a.on_decision({**d, "task_id": "later", "nodes": ["a2"], "start_at": now + 600}, now) == []
    job = east.run("scontrol", "show", "job", "-o", a.jobs["later"].job_id)
    eligible = next(f.split("=", 1)[1] for f in job.split() if f.startswith("EligibleTime="))
    assert "Reason=BeginTime" in job and abs(time.mktime(time.strptime(eligible, "%Y-%m-%dT%H:%M:%S")) - (now + 600)) < 5
    # moved to west: east cancels its job, west submits it from what the decision said
    move = {"task_id": "t1", "from_nodes": ["a1"], "to_nodes": ["b2"], "at": now + 1}
    assert a.on_move(move, now + 1) == [] and b.on_move(move, now + 1) == []
    assert b.jobs["t1"].nodes == ["b2"] and b.jobs["t1"].time_limit_s == 600
    a.save(), b.save()
    # redelivered, and again to a restarted bridge: still one job
    assert b.on_move(move, now + 2) == []
    again = SlurmRunner("card", tmp_path / "rb", west.env, cluster="west")
    again.load()
    assert again.on_move(move, now + 3) == []
    deadline = time.monotonic() + 30
    while placed_on(west).get("t1") != "b2" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert placed_on(west) == {"t1": "b2"} and jobs_by_name(west) == {"t1": 1}, west.run("scontrol", "show", "job", "-o")
    while "t1" in placed_on(east) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert "t1" not in placed_on(east) and jobs_by_name(east) == {"t1": 1, "later": 1}  # the one job, cancelled


async def test_one_cnsched_runs_tasks_in_the_cluster_of_their_nodes(make_settings, tmp_path, sites):
    from streams.bridge.slurm import run_bridge

    east, west = sites["east"], sites["west"]
    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port

    def bridge(cluster: SlurmCluster):
        stop, ready = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(run_bridge(settings, "card", {}, 1.0, stop, tmp_path / f"bridge-{cluster.name}",
                                              cluster.env, ready))
        return stop, ready, task

    bridges = {c.name: bridge(c) for c in (east, west)}
    try:
        for _, ready, _ in bridges.values():
            await asyncio.wait_for(ready.wait(), 60)
        deadline = time.monotonic() + 60
        while True:  # both inventories in: four nodes, each naming its cluster
            status, body = await asyncio.to_thread(call, port, "GET", "/compute/nodes")
            got = {n["node"]: n["report"].get("slurm_cluster") for n in body.get("items", [])} if status == 200 else {}
            if got == {"a1": "east", "a2": "east", "b1": "west", "b2": "west"}:
                break
            assert time.monotonic() < deadline, got
            await asyncio.sleep(0.3)
        # a gang of two whole nodes: in one cluster (no sites are configured: the cluster is the boundary)
        status, gang = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "gang", "type": "training-data-parallel", "peers": 2, "resources": {"cards": 8},
            "command": "sleep 60"})
        assert status == 200 and gang["status"] == "placed", gang
        home = east if set(gang["nodes"]) == {"a1", "a2"} else west
        assert set(gang["nodes"]) == set(home.nodes), gang["nodes"]
        other = west if home is east else east
        placed = {}
        for k in range(2):  # the other cluster's two nodes
            status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
                "id": f"one{k}", "type": "training-data-parallel", "resources": {"cards": 8}, "command": "sleep 60"})
            assert status == 200 and body["status"] == "placed", body
            placed[f"one{k}"] = body["nodes"][0]
        assert set(placed.values()) == set(other.nodes)
        deadline = time.monotonic() + 30
        while (len(placed_on(home)), len(placed_on(other))) != (1, 2) and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
        assert placed_on(other) == placed
        assert placed_on(home) == {"gang": {"east": "a[1-2]", "west": "b[1-2]"}[home.name]}  # one job, both nodes
        # the home cluster's bridge restarts: its group goes on from its committed offsets
        stop, _, task = bridges[home.name]
        stop.set()
        await task
        bridges[home.name] = bridge(home)
        await asyncio.wait_for(bridges[home.name][1].wait(), 60)
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "waits", "type": "training-data-parallel", "resources": {"cards": 8}, "command": "sleep 1"})
        assert status == 200 and body["status"] == "queued"
        await asyncio.sleep(3)  # a bridge that submitted again would have by now
        assert jobs_by_name(home) == {"gang": 1} and jobs_by_name(other) == {"one0": 1, "one1": 1}
    finally:
        for stop, _, task in bridges.values():
            stop.set()
            await task
        stop_process(worker)
