"""The measured models (issue 53): read from the upstream files as they are, bad input refused with the
file, line and field; jobs draw their communication share and card speed from them, and the replay
runs each job at its model's measured speed."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from streams.cli.main import main
from streams.replay.cluster import ClusterSpec, build_cluster
from streams.replay.jobs import sim_jobs
from streams.replay.models import GAVEL_OF, load_models
from streams.replay.results import replay
from streams.replay.traces import TraceError
from streams.replay.world import SimConfig
from tests.helpers.data import DATA, needs_data
from tests.streams.replay.test_engine import QUIET, trace, two_sites

MODELS = DATA / "models"


@needs_data
def test_the_upstream_files_give_each_models_measured_share_and_speed():
    t = load_models(MODELS)
    assert t.names == tuple(sorted(GAVEL_OF))
    # Gavel's V100 / P100 on one card, batch sizes as in the file (throughputs read off it, rounded):
    # ResNet-50 16, 32, 64, 128: 1.26, 1.59, 1.68, 1.58 -> median (1.58 + 1.59) / 2
    assert t.speed[t.names.index("imagenet")] == pytest.approx(1.585, abs=0.005)
    # Recommendation ran slower on the V100 than on the P100 in every batch size Gavel measured
    assert t.speed[t.names.index("ncf")] == pytest.approx(0.45, abs=0.01)
    # ResNet-18 32, 16, 64, 256, 128: 0.84, 0.90, 1.08, 1.33, 1.54 -> 1.08
    assert t.speed[t.names.index("cifar10")] == pytest.approx(1.08, abs=0.005)
    assert t.comm.shape == (6, 17) and (t.comm[:, :2] == 0).all()
    assert ((t.comm[:, 2:] > 0) & (t.comm[:, 2:] < 1)).all()
    # ncf synchronises most of a step, imagenet least (Pollux's placements, two nodes)
    two = dict(zip(t.names, t.comm[:, 2], strict=True))
    assert max(two, key=two.get) == "ncf" and min(two, key=two.get) == "imagenet"


def _copy(tmp_path):
    dst = tmp_path / "models"
    shutil.copytree(MODELS, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


@needs_data
@pytest.mark.parametrize(
    "file,edit,want",
    [
        (
            "pollux/bert/placements.csv",
            lambda s: s.replace("\n1,4,", "\n1,4,abc", 1),
            "line 2: step_time: not a number",
        ),
        (
            "pollux/ncf/placements.csv",
            lambda s: s.replace("\n1,", "\n10,", 1),
            "line 2: placement: expected one digit",
        ),
        (
            "pollux/yolov3/scalability.csv",
            lambda s: s.replace("num_nodes", "nodes", 1),
            "line 1: num_nodes: missing",
        ),
        (
            "pollux/cifar10/scalability.csv",
            lambda s: s.replace("\n6,", "\n6.5,", 1),
            "line 2: num_nodes: expected a whole",
        ),
        ("gavel/simulation_throughputs.json", lambda s: s[:-5], "not JSON"),
        (
            "gavel/simulation_throughputs.json",
            lambda s: s.replace('"null": 32.35', '"null": -32.35', 1),
            "v100: ('ResNet-18 (batch size 16)', 1): null: expected a throughput",
        ),
    ],
)
def test_bad_input_names_the_file_line_and_field(tmp_path, file, edit, want):
    root = _copy(tmp_path)
    path = root / file
    path.write_text(edit(path.read_text()))
    with pytest.raises(TraceError) as e:
        load_models(root)
    assert str(path) in str(e.value) and want in str(e.value)


@needs_data
def test_a_sync_longer_than_its_step_is_refused(tmp_path):
    root = _copy(tmp_path)
    path = root / "pollux" / "imagenet" / "placements.csv"
    lines = path.read_text().splitlines()
    lines[3] = ",".join([*lines[3].split(",")[:2], "0.5", "0.9"])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=r"line 4: sync_time: 0.9 is longer than the step"):
        load_models(root)


@needs_data
def test_the_cli_refuses_bad_models_with_one_line(tmp_path, capsys):
    root = _copy(tmp_path)
    (root / "gavel" / "simulation_throughputs.json").write_text(json.dumps({"v100": {}}))
    rc = main(["simulate", "--limit", "5", "--seeds", "1", "--no-store", "--models", str(root)])
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        rc == 2
        and len(err) == 1
        and err[0].startswith("cnsched: error: --models:")
        and "'p100'" in err[0]
    )


SPEC = ClusterSpec(sites=2, racks_per_site=2, nodes_per_rack=2, cards_per_node=8)


@needs_data
def test_jobs_draw_their_models_share_and_speed():
    models = load_models(MODELS)
    t = trace(np.arange(400.0), [1000.0] * 400, [16] * 200 + [8] * 200, [2] * 200 + [1] * 200)
    cluster = build_cluster(two_sites(), SPEC)
    jobs = sim_jobs(t, cluster, SimConfig(cluster=SPEC, models=models, **QUIET))
    assert set(jobs.model.tolist()) == set(range(6))
    np.testing.assert_array_equal(jobs.fast, models.speed[jobs.model])
    np.testing.assert_array_equal(jobs.comm[:200], models.comm[jobs.model[:200], 2])
    assert (jobs.comm[200:] == 0).all()
    same = sim_jobs(t, cluster, SimConfig(cluster=SPEC, models=models, **QUIET))
    np.testing.assert_array_equal(same.model, jobs.model)  # seeded
    equal = sim_jobs(t, cluster, SimConfig(cluster=SPEC, models=models, fast_speed=1.0, **QUIET))
    assert (equal.fast == 1.0).all()  # equal cards: every model runs alike
    assumed = sim_jobs(t, cluster, SimConfig(cluster=SPEC, **QUIET))
    assert (assumed.model == -1).all() and (assumed.fast == 1.5).all()


@needs_data
def test_a_job_runs_at_its_models_measured_speed_on_the_newer_card():
    """With one rack per site every node holds the newer card (the replay gives it to the even racks)
    and reports 1.5x; a one-node job takes its trace duration over its model's measured ratio."""
    models = load_models(MODELS)
    spec = ClusterSpec(sites=2, racks_per_site=1, nodes_per_rack=2, cards_per_node=8)
    cluster = build_cluster(two_sites(), spec)
    cfg = SimConfig(cluster=spec, models=models, data_share=0.0, **QUIET)
    seen = set()
    for seed in range(12):
        run = replay(
            trace([0.0], [9000.0], [8], [1]), cluster, cfg, ("topology", "ours"), seeds=(seed,)
        )
        job = run.jobs[seed]
        for policy in ("topology", "ours"):
            o = run.outcomes[(policy, seed)]
            assert o.end[0] - o.start[0] == pytest.approx(9000.0 / models.speed[job.model[0]]), (
                seed,
                policy,
            )
        seen.add(int(job.model[0]))
    assert (
        len(seen) >= 4
    )  # seeds draw different models: ncf's 0.45 and yolov3's 1.84 among them, likely


def test_without_the_default_models_the_replay_says_it_assumed_them(tmp_path, monkeypatch, capsys):
    """A clone without ../shared/data: the default models fall back to the assumed ones and the run's
    config says so, while a --models folder that is not there is still refused with one line."""
    import streams.cli.simulate as sim

    monkeypatch.setattr(sim, "MODELS", tmp_path / "nowhere")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("submit_s,duration_s,gpus,nodes,user,status,type\n0,100,8,1,u,Pass,fine-tune\n")
    net = tmp_path / "net.csv"
    net.write_text("src_site,dst_site,rtt_ms\na,b,10\nb,a,10\n")
    common = ["simulate", "--no-store", "--jobs", f"generic:{jobs}", "--network", f"generic:{net}", "--sites", "2",
              "--seeds", "1", "--workers", "1", "--rtt-dynamics", "none", "--policies", "ours", "--json"]
    assert main(common) == 0
    assert json.loads(capsys.readouterr().out)["config"]["models"] == "assumed"
    assert main([*common, "--models", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cnsched: error: --models:") and "No such file" in err[0]
