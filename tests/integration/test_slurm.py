"""Issue 29, first part, against a real Slurm (three slurmd of 8 cards each on this machine, Debian's
slurm-wlm; `make test` installs it) through the real broker and a live worker: the bridge's inventory
puts the three nodes in GET /compute/nodes with 8 free cards each; a Slurm job of 5 cards on n2 leaves
it 3; a drained node is down (an incident; its work moves)."""

from __future__ import annotations

import asyncio
import time

import pytest

from streams.bridge.slurm import run_inventory
from streams.kafka import ensure_topics
from streams.runtime.processes import start_worker, stop_process
from streams.runtime.slurm_cluster import missing
from tests.helpers.http import call

pytestmark = [pytest.mark.integration, pytest.mark.skipif(missing() is not None, reason=str(missing()))]


async def nodes(port: int, want: int, timeout: float = 60.0) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, body = await asyncio.to_thread(call, port, "GET", "/compute/nodes")
            if status == 200 and body["total"] == want and all(n.get("state") for n in body["items"]):
                return {n["node"]: n for n in body["items"]}
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("the nodes never appeared")
        await asyncio.sleep(0.3)


async def report(settings, slurm) -> None:
    await run_inventory(settings, "card", {"n1": {"zone": "dc1", "rack": "r1"}}, 1.0, asyncio.Event(), once=True,
                        env=slurm.env)


async def test_the_bridges_inventory_matches_slurm(make_settings, tmp_path, slurm):
    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    try:
        await report(settings, slurm)
        got = await nodes(port, 3)
        assert {n: (x["cards"], x["cards_reported_free"], x["state"]) for n, x in got.items()} == {
            "n1": (8, 8, "up"), "n2": (8, 8, "up"), "n3": (8, 8, "up")}
        assert got["n1"]["report"]["zone"] == "dc1" and got["n1"]["report"]["slurm_state"] == "IDLE"
        slurm.run("sbatch", "-w", "n2", "--gres=card:5", "-J", "outside", "-o", "/dev/null", "--wrap", "sleep 30")
        deadline = time.monotonic() + 30
        while "RUNNING" not in slurm.run("squeue", "-h", "-o", "%T") and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
        slurm.run("scontrol", "update", "nodename=n3", "state=drain", "reason=disk errors")
        await report(settings, slurm)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = await nodes(port, 3)
            if got["n2"]["cards_reported_free"] == 3 and got["n3"]["state"] == "down":
                break
            await asyncio.sleep(0.3)
        assert (got["n2"]["cards_reported_free"], got["n2"]["cards_free"]) == (3, 3)  # Slurm's job, not ours
        assert got["n3"]["state"] == "down" and got["n3"]["report"]["slurm_reason"].startswith("disk errors")
    finally:
        stop_process(worker)


async def until_status(port: int, tid: str, statuses: tuple[str, ...], timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        _, rec = await asyncio.to_thread(call, port, "GET", f"/tasks/{tid}")
        if rec.get("status") in statuses or time.monotonic() > deadline:
            return rec
        await asyncio.sleep(0.3)


async def test_tasks_run_as_slurm_jobs_where_cnsched_placed_them(make_settings, tmp_path, slurm):
    from streams.bridge.slurm import run_bridge

    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    stop, ready = asyncio.Event(), asyncio.Event()
    bridge = asyncio.create_task(run_bridge(settings, "card", {}, 1.0, stop, tmp_path / "bridge", slurm.env, ready))
    try:
        await asyncio.wait_for(ready.wait(), 60)
        await nodes(port, 3)
        placed = {}
        for k, secs in enumerate((4, 6, 8)):  # fill the three nodes; fill1 with a requested limit of 90 s
            status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
                "id": f"fill{k}", "type": "training-data-parallel", "resources": {"cards": 8},
                "command": f"sleep {secs}", **({"time_limit_s": 90} if k == 1 else {})})
            assert status == 200 and body["status"] == "placed", body
            placed[f"fill{k}"] = body["nodes"]
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "waits", "type": "training-data-parallel", "resources": {"cards": 8}, "command": "sleep 1"})
        assert status == 200 and body["status"] == "queued"
        # Slurm runs each where cnsched placed it
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            running = dict(line.split() for line in slurm.run("squeue", "-h", "-o", "%j %N").splitlines()
                           if line.split()[1:] and line.split()[1] != "")
            if len(running) == 3:
                break
            await asyncio.sleep(0.3)
        assert {t: [n] for t, n in running.items()} == placed
        # the requested limit is Slurm's time limit, in whole minutes rounded up (90 s: 2 min); none: the partition's
        limits = dict(line.split() for line in slurm.run("squeue", "-h", "-o", "%j %l").splitlines())
        assert limits["fill1"] == "2:00" and limits["fill0"] != "2:00", limits
        rec = await until_status(port, "fill0", ("finished",))
        fin = [h["event"] for h in rec["history"] if h.get("event", {}).get("event") == "finished"]
        assert len(fin) == 1 and 4 <= fin[0]["duration_s"] <= 6  # Slurm's run time of sleep 4
        rec = await until_status(port, "waits", ("finished",))
        # placed once, on a node whose fill had finished by then (usually fill0's; a worker that learns of
        # several ends in one batch takes the best of them), and Slurm ran it there
        chosen = [h["decision"] for h in rec["history"] if h.get("decision", {}).get("status") == "placed"]
        started = [h["event"]["nodes"] for h in rec["history"] if h.get("event", {}).get("event") == "started"]
        assert rec["status"] == "finished" and len(chosen) == 1, rec["history"]
        assert started == [chosen[0]["nodes"]] == [rec["nodes"]], rec["history"]
        ended = {}
        for fill, where in placed.items():
            done = await until_status(port, fill, ("finished",))
            ended[where[0]] = next(h["event"]["at"] for h in done["history"]
                                   if h.get("event", {}).get("event") == "finished")
        assert ended[rec["nodes"][0]] <= chosen[0]["decided_at"], (ended, rec["history"])
        # a command that fails (the first time only): failed, re-queued, run again, finished. First a
        # node must report the cards "waits" freed: Slurm's inventory comes every second, and until then
        # the node's own report (0 free) holds (a CI run submitted in between and found no room)
        deadline = time.monotonic() + 30
        while not any(n.get("cards_free", 0) >= 2 for n in (await nodes(port, 3)).values()):
            assert time.monotonic() < deadline, "no node reported free cards after the fill tasks ended"
            await asyncio.sleep(0.3)
        marker = tmp_path / "flaky.marker"
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "flaky", "type": "fine-tune", "resources": {"cards": 2},
            "command": f"if [ -e {marker} ]; then sleep 1; else touch {marker}; echo state > $CNSCHED_CHECKPOINT_FILE;"
                       f" sleep 2; exit 3; fi"})
        assert status == 200 and body["status"] == "placed", body
        rec = await until_status(port, "flaky", ("finished",))
        events = [h["event"] for h in rec["history"] if "event" in h]
        kinds = [e["event"] for e in events]
        assert rec["status"] == "finished" and "failed" in kinds and kinds[-1] == "finished", rec["history"]
        ckpt = next(e for e in events if e["event"] == "checkpoint")  # the file the job wrote, reported
        assert ckpt["checkpoint_location"].endswith("flaky.ckpt") and ckpt["checkpoint_gb"] > 0
        again = [h["decision"] for h in rec["history"] if "decision" in h][-1]
        assert again["status"] == "placed" and again["restarts"] == 1
        assert again["resume_from"] == ckpt["checkpoint_at"]  # resumed from the checkpoint it saved
        assert "FAILED NonZeroExitCode exit 3:0" in next(h["event"]["reason"] for h in rec["history"]
                                                        if h.get("event", {}).get("event") == "failed")
    finally:
        stop.set()
        await bridge
        stop_process(worker)


def slurm_used(slurm) -> dict[str, int]:
    from streams.bridge.slurm_parse import node_reports

    return {r["node"]: r["cards"] - r["free"]["cards"] for r in node_reports(slurm.run("scontrol", "show", "node", "-o",
                                                                                       "-d"), time.time())}


async def books_agree(port: int, slurm, timeout: float = 30.0) -> dict[str, int]:
    """cnsched's booked cards per node equal Slurm's allocated GRES (both settle within a few polls)."""
    deadline = time.monotonic() + timeout
    while True:
        booked = {n: x["cards_booked"] for n, x in (await nodes(port, 3)).items()}
        used = slurm_used(slurm)
        if booked == used or time.monotonic() > deadline:
            assert booked == used, (booked, used)
            return used
        await asyncio.sleep(0.5)


async def test_a_drained_node_moves_its_job_and_a_restarted_bridge_submits_nothing_twice(make_settings, tmp_path,
                                                                                          slurm):
    from streams.bridge.slurm import run_bridge

    settings = make_settings(rescore_interval_seconds=0.3, node_timeout_seconds=60)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    work = tmp_path / "bridge"

    def bridge():
        stop, ready = asyncio.Event(), asyncio.Event()
        return stop, ready, asyncio.create_task(run_bridge(settings, "card", {}, 1.0, stop, work, slurm.env, ready))

    stop, ready, task = bridge()
    try:
        await asyncio.wait_for(ready.wait(), 60)
        await nodes(port, 3)
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "long", "type": "training-data-parallel", "resources": {"cards": 8}, "command": "sleep 60"})
        home = body["nodes"][0]
        used = await books_agree(port, slurm)
        assert used[home] == 8 and sum(used.values()) == 8
        slurm.run("scontrol", "update", f"nodename={home}", "state=drain", "reason=maintenance")
        rec = await until_status(port, "long", ("placed", "running"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, rec = await asyncio.to_thread(call, port, "GET", "/tasks/long")
            moves = [h["reschedule"] for h in rec["history"] if "reschedule" in h]
            if moves:
                break
            await asyncio.sleep(0.3)
        assert [(m["trigger"], m["from_nodes"]) for m in moves] == [("node_failed", [home])]
        target = moves[0]["to_nodes"][0]
        _, inc = await asyncio.to_thread(call, port, "GET", "/incidents")
        assert [i["node"] for i in inc["open"]] == [home]  # open while the node is drained
        deadline = time.monotonic() + 30
        while "long " + target not in slurm.run("squeue", "-h", "-o", "%j %N") and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
        assert slurm.run("squeue", "-h", "-o", "%j %N").split() == ["long", target]  # cancelled there, runs here
        used = await books_agree(port, slurm)
        assert used[target] == 8 and used[home] == 0
        # a job runs; the bridge stops; the job ends and a task is decided meanwhile; a new bridge reports the
        # end and takes the task up, once
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "short", "type": "fine-tune", "resources": {"cards": 2}, "command": "sleep 3"})
        assert (await until_status(port, "short", ("running",)))["status"] == "running"
        stop.set()
        await task
        deadline = time.monotonic() + 30
        while "short" in slurm.run("squeue", "-h", "-o", "%j") and time.monotonic() < deadline:
            await asyncio.sleep(0.3)  # it ended while no bridge ran
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "quick", "type": "fine-tune", "resources": {"cards": 2}, "command": "sleep 2"})
        assert body["status"] == "placed"
        stop, ready, task = bridge()
        await asyncio.wait_for(ready.wait(), 60)
        rec = await until_status(port, "quick", ("finished",))
        assert rec["status"] == "finished"
        rec = await until_status(port, "short", ("finished",))  # its end, reported by the new bridge
        assert rec["status"] == "finished" and [h["event"]["event"] for h in rec["history"] if "event" in h].count(
            "finished") == 1
        names = [j.split()[0] for j in slurm.run("squeue", "-h", "-t", "all", "-o", "%j %T").splitlines()]
        assert names.count("quick") == 1 and names.count("long") == 2, names  # long: its cancelled job and its new one
        await books_agree(port, slurm)
    finally:
        stop.set()
        await task
        stop_process(worker)


async def test_the_node_agent_reports_slurms_free_cards_and_a_measured_benchmark(make_settings, tmp_path, slurm):
    from streams.bridge.node_agent import NodeAgent, run_node_agent

    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    try:
        slurm.run("sbatch", "-w", "n2", "--gres=card:5", "-J", "outside", "-o", "/dev/null", "--wrap", "sleep 30")
        deadline = time.monotonic() + 30
        while "RUNNING" not in slurm.run("squeue", "-h", "-o", "%T") and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
        agent = NodeAgent("n2", {"cards": 8, "accel_class": "card", "zone": "dc1"}, slurm_node="n2", slurm_gres="card",
                          benchmark_cmd="echo 'resnet50: 4321.5 samples/s'", benchmark_name="resnet50-train",
                          env=slurm.env)
        assert await run_node_agent(settings, agent, 1.0, asyncio.Event(), once=True) == 1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                status, node = await asyncio.to_thread(call, settings.web_port, "GET", "/compute/nodes/n2")
                if status == 200:
                    break
            except OSError:
                pass
            await asyncio.sleep(0.3)
        assert (node["cards"], node["cards_reported_free"], node["report"]["zone"]) == (8, 3, "dc1")
        assert node["report"]["benchmarks"][0]["value"] == 4321.5 and node["warnings"] == []  # measured: no warning
    finally:
        stop_process(worker)


def test_a_bridge_killed_between_sbatch_and_saving_adopts_its_job_instead_of_submitting_again(tmp_path, slurm):
    from streams.bridge.slurm_jobs import SlurmRunner

    decision = {"task_id": "t1", "status": "placed", "nodes": ["n1"], "cards": 4, "decided_at": 1000.5,
                "command": "sleep 20"}
    first = SlurmRunner("card", tmp_path / "b", slurm.env)
    first.load()
    assert first.on_decision(decision, time.time()) == []  # submitted; then "killed": nothing saved
    again = SlurmRunner("card", tmp_path / "b", slurm.env)
    again.load()
    assert again.jobs["t1"].job_id == first.jobs["t1"].job_id and again.jobs["t1"].cards == 4
    assert again.on_decision(decision, time.time()) == []  # redelivered: its job is known
    assert slurm.run("squeue", "-h", "-o", "%j").split() == ["t1"]
    assert again.jobs["t1"].command == "sleep 20"
    refused = again.on_decision({**decision, "task_id": "t2", "cards": 64, "decided_at": 1001.0}, time.time())
    assert [(e["event"], e["nodes"]) for e in refused] == [("refused", ["n1"])]  # sbatch turned it away
    # a task without a command: nothing to run, so no job holds the cards; cancelled, saying why
    (cancel,) = again.on_decision({**decision, "task_id": "t3", "decided_at": 1002.0, "command": None}, time.time())
    assert (cancel["event"], cancel["by"]) == ("cancel", "slurm-bridge") and "no command" in cancel["reason"]
    assert "t3" not in again.jobs and slurm.run("squeue", "-h", "-o", "%j").split() == ["t1"]


async def test_a_degraded_path_moves_the_job_to_the_new_node(make_settings, tmp_path, slurm):
    """A data-parallel job reads from `store`; its node's path there degrades (x250, 5 % lost): cnsched
    moves it (trigger degradation) and the bridge cancels the job and runs it on the new node."""
    import json

    from schemas.topics import NETSTATE_WINDOWS
    from streams.bridge.slurm import run_bridge
    from streams.kafka import producer
    from tests.integration.test_scheduling_api import rtt_window

    settings = make_settings(rescore_interval_seconds=0.3)
    await ensure_topics(settings)
    worker = start_worker(settings, tmp_path / "w.log")
    port = settings.web_port
    stop, ready = asyncio.Event(), asyncio.Event()
    bridge = asyncio.create_task(run_bridge(settings, "card", {}, 1.0, stop, tmp_path / "bridge", slurm.env, ready))
    p = producer(settings)
    await p.start()
    try:
        await asyncio.wait_for(ready.wait(), 60)
        await nodes(port, 3)
        now = time.time()
        for node, ms in (("n1", 1.0), ("n2", 1.0), ("n3", 200.0)):
            await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(
                rtt_window(node, "store", now, ms * 0.95, ms)).encode(), key=b"k")
        deadline = time.monotonic() + 30
        while (await asyncio.to_thread(call, port, "GET", "/network/paths/n2/store"))[0] != 200 and \
                time.monotonic() < deadline:
            await asyncio.sleep(0.3)
        status, body = await asyncio.to_thread(call, port, "POST", "/tasks", {
            "id": "dp", "type": "training-data-parallel", "resources": {"cards": 4}, "checkpoint_gb": 1,
            "alpha": 0.2,  # it reads from the store all along (left to the rule, one node loading nothing: alpha 1)
            "data_source": {"node": "store", "size_gb": 0}, "expected_duration_s": 7200, "command": "sleep 120"})
        home = body["nodes"][0]
        assert home in ("n1", "n2"), body  # near the data
        assert (await until_status(port, "dp", ("running",)))["status"] == "running"
        await p.send_and_wait(settings.topic(NETSTATE_WINDOWS), json.dumps(
            rtt_window(home, "store", now + 10, 240.0, 250.0, lost=5)).encode(), key=b"k")
        deadline = time.monotonic() + 60
        moves: list = []
        while not moves and time.monotonic() < deadline:
            _, rec = await asyncio.to_thread(call, port, "GET", "/tasks/dp")
            moves = [h["reschedule"] for h in rec["history"] if "reschedule" in h]
            await asyncio.sleep(0.3)
        assert [(m["trigger"], m["from_nodes"]) for m in moves] == [("degradation", [home])]
        target = moves[0]["to_nodes"]
        assert target != [home] and target != ["n3"]
        deadline = time.monotonic() + 30
        while slurm.run("squeue", "-h", "-o", "%j %N").split() != ["dp", target[0]] and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
        assert slurm.run("squeue", "-h", "-o", "%j %N").split() == ["dp", target[0]]  # requeued where it moved
        assert (await until_status(port, "dp", ("running",)))["nodes"] == target
        await books_agree(port, slurm)
    finally:
        await p.stop()
        stop.set()
        await bridge
        stop_process(worker)
