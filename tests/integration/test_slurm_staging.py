"""Issue 53's E2 on the real three-node Slurm (the fixture in conftest.py): a decision's staging runs as
a Slurm job of its own on the target's side before the task's job, which then loads the local copy and
reports that load time; a staging that fails fails its task instead of leaving its job waiting."""

from __future__ import annotations

import os
import sys
import time

import pytest

from streams.runtime.slurm_cluster import missing

pytestmark = [pytest.mark.integration, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

# the job: reads its data where the bridge says it is, and writes how long that took
READ = (f"{sys.executable} -c \"import json, os, time; t = time.time(); "
        "data = open(os.environ['CNSCHED_DATA_PATH'], 'rb').read(); took = time.time() - t; "
        "open(os.environ['CNSCHED_PROGRESS_FILE'] + '.where', 'w').write(os.environ['SLURMD_NODENAME'] + ' ' + repr(t)); "
        "json.dump({'load_s': took, 'steps': len(data), 'total_steps': len(data)}, "
        "open(os.environ['CNSCHED_PROGRESS_FILE'], 'w'))\"; sleep 1")


def test_a_staged_data_set_is_copied_on_the_targets_side_before_the_job_which_loads_it_there(tmp_path, slurm):
    from streams.bridge.slurm_jobs import SlurmRunner, wait_for
    from streams.bridge.slurm_staging import DEFAULT_STAGING_COMMAND

    stores = tmp_path / "stores"
    (stores / "store.west").mkdir(parents=True)
    data = os.urandom(4 << 20)
    (stores / "store.west" / "imagenet").write_bytes(data)
    # the copy as slow as a wide-area one (3 s), saying where and when it ended
    slow = ("sleep 3 && " + DEFAULT_STAGING_COMMAND +
            " && echo $SLURMD_NODENAME $(date +%s.%N) > {stores}/{target}/{name}.staged")
    runner = SlurmRunner("card", tmp_path / "b", slurm.env, staging_command=slow, stores=stores)
    runner.load()
    now = time.time()
    stage = {"name": "imagenet", "source": "store.west", "target": "store.east", "size_gb": 0.004, "expected_s": 3.0}
    placed = {"task_id": "t", "status": "placed", "nodes": ["n2"], "cards": 1, "decided_at": now, "command": READ,
              "staging": [stage]}
    assert runner.on_decision(placed, time.time()) == []
    # a staging whose source has no such data: its task fails (the scheduler's fallback takes it), its job is gone
    broken = {**placed, "task_id": "u", "nodes": ["n3"], "staging": [{**stage, "name": "missing", "target": "store.south"}]}
    assert runner.on_decision(broken, time.time()) == []
    got = wait_for(runner, lambda ev: any(e["event"] == "finished" for e in ev) and
                   any(e["task_id"] == "u" and e["event"] == "failed" for e in ev), timeout_s=90)
    by = {t: [e for e in got if e["task_id"] == t] for t in ("t", "u")}
    assert [e["event"] for e in by["t"]] == ["staged", "started", "loaded", "progress", "finished"], by["t"]
    staged, loaded = by["t"][0], by["t"][2]
    assert staged["nodes"] == ["n2"] and staged["staged"] == [{"name": "imagenet", "target": "store.east"}]
    assert staged["duration_s"] >= 3.0
    # copied on the target's node, before the job read it there
    assert (stores / "store.east" / "imagenet").read_bytes() == data
    copy_node, copied_at = (stores / "store.east" / "imagenet.staged").read_text().split()
    job_node, read_at = runner.progress_file("t").with_suffix(".json.where").read_text().split()
    assert copy_node == job_node == "n2" and float(read_at) >= float(copied_at)
    # the load it reports is the local one: a fraction of the copy's time
    assert 0 <= loaded["load_s"] < 1.0 < staged["duration_s"]
    (failed,) = by["u"]
    assert failed["event"] == "failed" and failed["reason"].startswith("staging its data failed: FAILED")
    assert slurm.run("squeue", "-h", "-o", "%j").split() == []  # u's job is not left waiting for it
    assert not (stores / "store.south" / "missing").exists()


def test_a_waiting_gangs_copy_runs_ahead_beside_the_work_there_and_is_made_once(tmp_path, slurm):
    from streams.bridge.slurm_jobs import SlurmRunner, wait_for
    from streams.bridge.slurm_staging import DEFAULT_STAGING_COMMAND

    stores = tmp_path / "stores"
    (stores / "store.west").mkdir(parents=True)
    data = {name: os.urandom(1 << 20) for name in ("imagenet", "coco")}
    for name, blob in data.items():
        (stores / "store.west" / name).write_bytes(blob)
    # each copy appends where and when it ended: a copy made twice would show two lines
    slow = ("sleep 3 && " + DEFAULT_STAGING_COMMAND +
            " && echo $SLURMD_NODENAME $(date +%s.%N) >> {stores}/{target}/{name}.staged")
    runner = SlurmRunner("card", tmp_path / "b", slurm.env, staging_command=slow, stores=stores)
    runner.load()
    done = tmp_path / "busy.end"
    busy = {"task_id": "busy", "status": "placed", "nodes": ["n2"], "cards": 8, "decided_at": time.time(),
            "command": f"sleep 12; date +%s.%N > {done}"}
    assert runner.on_decision(busy, time.time()) == []

    def stage(name):
        return {"name": name, "source": "store.west", "target": "store.east", "size_gb": 0.001, "expected_s": 3.0}

    def copies(name):
        return [line.split() for line in (stores / "store.east" / f"{name}.staged").read_text().splitlines()]

    # the gang waits for n2 (all its cards are busy): its queued decision's copy runs now, beside the work
    queued = {"task_id": "g", "status": "queued", "nodes": [], "waits_for": ["n2"], "cards": 8,
              "decided_at": time.time(), "staging": [stage("imagenet")]}
    assert runner.on_decision(queued, time.time()) == [] and runner.on_decision(queued, time.time()) == []
    got = wait_for(runner, lambda ev: any(e["event"] == "staged" for e in ev), timeout_s=30)
    got = [e for e in got if e["task_id"] != "busy"]
    assert [(e["task_id"], e["event"], e["nodes"]) for e in got] == [("g", "staged", ["n2"])]
    assert got[0]["staged"] == [{"name": "imagenet", "target": "store.east"}] and not done.exists()
    # placed there with the copy carried again (the scheduler had not heard): nothing is copied again
    placed = {"task_id": "g", "status": "placed", "nodes": ["n2"], "cards": 8, "decided_at": time.time(),
              "command": READ, "staging": [stage("imagenet")], "data_at": {"name": "imagenet", "store": "store.east"}}
    assert runner.on_decision(placed, time.time()) == []
    # another gang placed while its copy ahead still runs: its job waits for that copy, not a second one
    runner.on_decision({**queued, "task_id": "k", "staging": [stage("coco")]}, time.time())
    runner.on_decision({**placed, "task_id": "k", "nodes": ["n3"], "staging": [stage("coco")], "data_at": None},
                       time.time())
    got = wait_for(runner, lambda ev: sum(e["event"] == "finished" and e["task_id"] in "gk" for e in ev) == 2,
                   timeout_s=90)
    assert [e["event"] for e in got if e["task_id"] == "g"] == ["started", "loaded", "progress", "finished"], got
    assert [e["event"] for e in got if e["task_id"] == "k"] == ["staged", "started", "loaded", "progress",
                                                                 "finished"], got
    assert len(copies("imagenet")) == 1 and len(copies("coco")) == 1
    (node, copied_at), = copies("imagenet")
    assert node == "n2" and float(copied_at) < float(done.read_text())  # while the work there ran
    for task, name in (("g", "imagenet"), ("k", "coco")):  # each read its copy after it was made
        job_node, read_at = runner.progress_file(task).with_suffix(".json.where").read_text().split()
        assert float(read_at) >= float(copies(name)[0][1])
        assert (stores / "store.east" / name).read_bytes() == data[name]
    # a later task placed to read a copy is pointed at it and copies nothing
    later = {"task_id": "h", "status": "placed", "nodes": ["n3"], "cards": 1, "decided_at": time.time(),
             "command": READ, "data_at": {"name": "imagenet", "store": "store.east"}}
    assert runner.on_decision(later, time.time()) == []
    got = wait_for(runner, lambda ev: any(e["task_id"] == "h" and e["event"] == "finished" for e in ev), timeout_s=60)
    assert [e["event"] for e in got if e["task_id"] == "h"] == ["started", "loaded", "progress", "finished"], got
    assert len(copies("imagenet")) == 1
    assert slurm.run("squeue", "-h", "-o", "%j").split() == []
